"""Workspace trees the workspace tests share."""

#: One of each credential the default list names, at the top and deeper.
CREDENTIAL_FILES = [".env", ".env.local", "id_rsa", "id_rsa.pub", "id_ed25519", "server.pem", "tls/server.key", "cert.p12",
                    ".ssh/config", ".aws/credentials", ".azure/accessTokens.json", ".gcloud/key.json",
                    ".config/gcloud/application_default_credentials.json", ".kube/config", ".docker/config.json",
                    ".netrc", ".git-credentials", "credentials.json", "conf/gcp-credentials-prod.json",
                    "terraform.tfstate", "infra/terraform.tfstate.backup", "sub/.env", ".pypirc", ".npmrc"]
