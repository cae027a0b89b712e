"""Several instances of one bot on one PostgreSQL database (DESIGN section 14).

``node.Cluster`` is the core's ``Peers`` (session lanes by lease, hand-overs and stops by
LISTEN/NOTIFY, taking over a dead instance's work) and the channels' ``Leases``; ``status``
reads what ``chatgate status`` shows; ``capability`` is its spec. Nothing here runs on SQLite,
and nothing is imported with the package (the registry imports the spec on every start:
asyncpg and the cluster's modules load only when it joins).
"""
