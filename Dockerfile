# cebroker with every protocol extra (MQTT, AMQP 1.0, Kafka, NATS).
FROM python:3.11-slim
WORKDIR /app
COPY filters ./filters
COPY protocols ./protocols
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir ./filters "./protocols[all]" ".[mqtt,amqp,kafka,nats,postgres]"
RUN useradd --system --home /data cebroker && mkdir -p /data /keys && chown cebroker /data /keys
USER cebroker
ENV CEBROKER_HOST=0.0.0.0 CEBROKER_PORT=8080 CEBROKER_DB=/data/cebroker.db
EXPOSE 8080
VOLUME /data
ENTRYPOINT ["cebroker"]
CMD ["serve"]
