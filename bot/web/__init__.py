"""What every web page and server of the bot shares (the dashboard's, the web chat's, the API's,
the ops probes'): logins by cookie, CSRF tokens, the login limiter, the Origin and Host checks
(``auth``); passwords as scrypt hashes (``passwords``); HTML with escaping on by default
(``html``); listening on a configured ``host:port`` (``serve``)."""
