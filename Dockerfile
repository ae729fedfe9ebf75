# The agent-session server: `docker build -t agent-session .`, then
#   docker run -p 8080:8080 -v keys:/etc/agent-session agent-session \
#     --store postgres://user@db/sessions serve --listen 0.0.0.0:8080 \
#     --api-keys /etc/agent-session/keys
# (docs/server.md; `agent-session api-key` makes the key file's lines).
FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p agent-session-cli \
 && cp target/release/agent-session /usr/local/bin/agent-session

FROM debian:bookworm-slim
RUN useradd --system --home /var/lib/agent-session --create-home agent-session
COPY --from=build /usr/local/bin/agent-session /usr/local/bin/agent-session
USER agent-session
WORKDIR /var/lib/agent-session
EXPOSE 8080
ENV AGENT_SESSION_LISTEN=0.0.0.0:8080
# /readyz answers 200 while the store does.
HEALTHCHECK --interval=10s --timeout=3s --retries=3 CMD \
  bash -c 'exec 3<>/dev/tcp/127.0.0.1/8080 && printf "GET /readyz HTTP/1.0\r\n\r\n" >&3 && grep -q "200 OK" <&3'
ENTRYPOINT ["agent-session"]
CMD ["--store", "sqlite:///var/lib/agent-session/sessions.db", "serve", "--insecure-no-auth"]
