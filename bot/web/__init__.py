"""What every web page of the bot shares (the dashboard's, the web chat's): logins by cookie,
CSRF tokens, the login limiter, the Origin and Host checks (``auth``)."""
