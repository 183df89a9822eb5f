#!/usr/bin/env bash
# Generates the secrets deploy/docker-compose.yml reads, in deploy/secrets/ (git-ignored), or in DIR:
#   deploy/make-secrets.sh [DIR]
#   postgres_password   a random PostgreSQL password (the postgres image reads it as POSTGRES_PASSWORD_FILE)
#   billingd.env        BILLING_DATABASE with that password (compose env_file), and the App Store Server API
#                       settings, commented out until you have the key
#   api-keys.json       the SHA-256 digests of four fresh API keys, each scoped (billingd --api-keys):
#                         app-backend  billing.v1.Billing/* and grpc.health.v1.Health/*: the app's backend (no Admin)
#                         operator     billing.admin.v1.Admin/* and grpc.health.v1.Health/*: billingctl admin ...
#                         support      billing.v1.Support/*, billing.v1.Billing/GetOrder and Health: support staff
#                                      (billingctl customer / grant / transfer / refund / audit); its name is the
#                                      operator the audit trail records, so give each person a key of their own
#                         finance      billing.v1.Revenue/* and Health: revenue figures and the export, no customer's
#                                      data (billingctl revenue ...)
#   appstore/           where the App Store Server API's In-App Purchase key goes, as appstore/AuthKey.p8
#                       (compose mounts it at /etc/billingd/appstore; docs/APPSTORE_API.md says what it enables)
# The API keys themselves are printed once, for their holders (billingctl --api-key, or BILLING_API_KEY); they are
# not stored. Existing files are kept: delete them (or the whole directory) to rotate; docs/CONFIGURATION.md
# "Rotating a key" rotates one key without downtime.
set -euo pipefail
dir="${1:-$(cd "$(dirname "$0")" && pwd)/secrets}"
mkdir -p "$dir/appstore"
chmod 0700 "$dir"  # the files inside are world-readable for the containers' users (999, 10001); the directory is not
chmod 0755 "$dir/appstore"
if [ ! -f "$dir/postgres_password" ]; then
  (umask 022; openssl rand -hex 24 > "$dir/postgres_password")
fi
if [ ! -f "$dir/billingd.env" ]; then
  (umask 077; {
    printf 'BILLING_DATABASE=postgres://billing:%s@postgres:5432/billing\n' "$(cat "$dir/postgres_password")"
    printf '%s\n' \
      '# The App Store Server API (restore by transaction id, reconciliation, the Admin service): copy the' \
      '# In-App Purchase key from App Store Connect to appstore/AuthKey.p8 next to this file (chmod 0644), then' \
      '# uncomment these three lines with its key id and issuer id. All three go together, or none.' \
      '# BILLING_APPSTORE_API_KEY_ID=ABC123DEFG' \
      '# BILLING_APPSTORE_API_ISSUER_ID=00000000-0000-0000-0000-000000000000' \
      '# BILLING_APPSTORE_API_PRIVATE_KEY=/etc/billingd/appstore/AuthKey.p8'
  } > "$dir/billingd.env")
fi
if [ ! -f "$dir/api-keys.json" ]; then
  app_key=$(openssl rand -hex 32)
  operator_key=$(openssl rand -hex 32)
  support_key=$(openssl rand -hex 32)
  finance_key=$(openssl rand -hex 32)
  digest() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
  (umask 022; cat > "$dir/api-keys.json" <<JSON
{ "keys": [
    { "name": "app-backend", "sha256": "$(digest "$app_key")",
      "methods": ["billing.v1.Billing/*", "grpc.health.v1.Health/*"] },
    { "name": "operator", "sha256": "$(digest "$operator_key")",
      "methods": ["billing.admin.v1.Admin/*", "grpc.health.v1.Health/*"] },
    { "name": "support", "sha256": "$(digest "$support_key")",
      "methods": ["billing.v1.Support/*", "billing.v1.Billing/GetOrder", "grpc.health.v1.Health/*"] },
    { "name": "finance", "sha256": "$(digest "$finance_key")",
      "methods": ["billing.v1.Revenue/*", "grpc.health.v1.Health/*"] }
] }
JSON
  )
  echo "app-backend API key (billing.v1.Billing and Health, no Admin; give it to the app's backend): $app_key"
  echo "operator API key (billing.admin.v1.Admin and Health; for billingctl admin ...): $operator_key"
  echo "support API key (billing.v1.Support, GetOrder and Health; for billingctl customer ...): $support_key"
  echo "finance API key (billing.v1.Revenue and Health; for billingctl revenue ...): $finance_key"
  echo "(only their digests are kept, in $dir/api-keys.json)"
elif grep -q '"\*"' "$dir/api-keys.json"; then
  echo "warning: $dir/api-keys.json holds a key for every method (\"*\"), Admin included; delete the file and run again for scoped keys" >&2
fi
