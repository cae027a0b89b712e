"""Reminders and scheduled tasks (DESIGN section 13).

A job is a rule (at / every / cron) with an IANA zone (``rules``: pure functions) and a kind:
a reminder is text sent at the time, a task is a turn of the turn runner. ``Schedules``
(``service``) makes, lists and changes jobs for the ``schedule`` tool (``tool``) and the
commands (``commands``); the ``Scheduler`` (``scheduler``) sleeps until the next due instant,
claims each occurrence before it runs it and hands it on (``checks`` may skip a task's model
call). Jobs, occurrences and zones live in the one store: ``jobs`` is the nouns and the
``ScheduleStore`` port, ``store`` its statements and operations (``StoredSchedules``).
"""
