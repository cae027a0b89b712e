"""Cost in sight: ``/usage`` (a person's tokens and cost today and over 30 days, against their
limits), the usage footer under each answer (``agent.usage_footer``), and the owners told once a
day when a person passes ``limits.alert_at`` of a daily budget (remembered in the database, so
several instances and restarts tell them once). ``capability`` wires it, ``report`` words it,
``ops`` reads and writes the database, ``alerts`` watches the charges."""
