"""Several instances of one bot on one PostgreSQL database (DESIGN section 14).

``Cluster`` is the core's ``Peers`` (session lanes by lease, hand-overs and stops by
LISTEN/NOTIFY, taking over a dead instance's work) and the channels' ``Leases``; ``status``
reads what ``chatgate status`` shows. Nothing here runs on SQLite.
"""

from bot.cluster.node import Cluster, ClusterSettings, default_instance

__all__ = ["Cluster", "ClusterSettings", "default_instance"]
