# Multi-stage build: release binaries in a slim runtime image, running as a non-root user.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p interview-runtime -p interview-replay

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --home-dir /app --uid 10001 interview
COPY --from=build /src/target/release/interview-runtime /src/target/release/replay /usr/local/bin/
USER interview
WORKDIR /app
ENV BIND=0.0.0.0:8080 \
    DATA_DIR=/app/data
EXPOSE 8080
# Production: set DATABASE_URL=postgres://… and RESEARCHER_TOKENS; the embedded store writes
# under /app/data (mount a volume there).
CMD ["interview-runtime"]
