FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1

# The code (with the workspace templates) lives in /app; what the bot writes lives in
# /srv/chatgate, whose data/ and workspaces/ are volumes, so a bind mount never hides
# the templates. See docs/operations/docker.md.
WORKDIR /app
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY adapters ./adapters
COPY workspaces/templates ./workspaces/templates
# bubblewrap: the sandbox of the exec tool (tools.exec.sandbox: bwrap). It needs user
# namespaces: run the container with --security-opt seccomp=unconfined (and, on hosts with
# AppArmor, --security-opt apparmor=unconfined).
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*
# A non-root user (uid 10001) owns what the bot writes; the code stays root's.
# PYTHONDONTWRITEBYTECODE (and a code directory the bot may not write) would leave chatgate's
# own modules compiled from source at every start (~0.25 s of CPU): compile them once here.
RUN pip install -e . \
    && python -m compileall -q /app/bot /app/adapters \
    && useradd --create-home --uid 10001 chatgate \
    && mkdir -p /srv/chatgate/data /srv/chatgate/workspaces \
    && chown -R chatgate /srv/chatgate

USER chatgate
WORKDIR /srv/chatgate
VOLUME ["/srv/chatgate/data", "/srv/chatgate/workspaces"]

# Liveness: ops' /healthz on its default bind, 127.0.0.1:9464 (docs/operations/observability.md).
# Set ops.enabled: true in the config (keep the default bind), or run the container with
# --no-healthcheck: without ops nothing answers there and Docker reports the container unhealthy.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:9464/healthz', timeout=4).status != 200)"]

# Secrets: pass them as environment variables, or mount the .env of `chatgate init` beside the
# config (/config/.env, readable by uid 10001): chatgate reads it at start.
CMD ["chatgate", "run", "-c", "/config/config.yaml"]
