#!/usr/bin/env bash
# Generates the secrets deploy/docker-compose.yml reads, in deploy/secrets/ (git-ignored):
#   postgres_password   a random PostgreSQL password (the postgres image reads it as POSTGRES_PASSWORD_FILE)
#   billingd.env        BILLING_DATABASE with that password (compose env_file)
#   api-keys.json       the SHA-256 digest of a fresh API key (billingd --api-keys)
# The API key itself is printed once, for the client (billingctl --api-key, or BILLING_API_KEY); it is not stored.
# Existing files are kept: delete deploy/secrets/ to rotate everything.
set -euo pipefail
dir="$(cd "$(dirname "$0")" && pwd)/secrets"
mkdir -p "$dir"
chmod 0700 "$dir"  # the files inside are world-readable for the containers' users (999, 10001); the directory is not
if [ ! -f "$dir/postgres_password" ]; then
  (umask 022; openssl rand -hex 24 > "$dir/postgres_password")
fi
if [ ! -f "$dir/billingd.env" ]; then
  (umask 077; printf 'BILLING_DATABASE=postgres://billing:%s@postgres:5432/billing\n' "$(cat "$dir/postgres_password")" > "$dir/billingd.env")
fi
if [ ! -f "$dir/api-keys.json" ]; then
  key=$(openssl rand -hex 32)
  digest=$(printf '%s' "$key" | sha256sum | cut -d' ' -f1)
  (umask 022; printf '{ "keys": [ { "name": "local", "sha256": "%s", "methods": ["*"] } ] }\n' "$digest" > "$dir/api-keys.json")
  echo "API key (give it to the client; only its digest is kept): $key"
fi
