FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app

COPY pyproject.toml README.md ./
COPY bot ./bot
COPY adapters ./adapters
COPY workspaces/templates ./workspaces/templates
RUN pip install . && useradd --create-home --uid 10001 chatgate \
    && mkdir -p /app/data /app/workspaces && chown -R chatgate /app/data /app/workspaces

USER chatgate
VOLUME ["/app/data", "/app/workspaces"]
CMD ["chatgate", "run", "-c", "/config/config.yaml"]
