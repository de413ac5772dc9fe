"""Workspace trees the workspace tests share."""

import base64
import json

#: One of each credential the default list names, at the top and deeper.
CREDENTIAL_FILES = [".env", ".env.local", "id_rsa", "id_rsa.pub", "id_ed25519", "server.pem", "tls/server.key", "cert.p12",
                    ".ssh/config", ".aws/credentials", ".azure/accessTokens.json", ".gcloud/key.json",
                    ".config/gcloud/application_default_credentials.json", ".kube/config", ".docker/config.json",
                    ".netrc", ".git-credentials", "credentials.json", "conf/gcp-credentials-prod.json",
                    "terraform.tfstate", "infra/terraform.tfstate.backup", "sub/.env", ".pypirc", ".npmrc"]


def _armored(kind: str, seed: int, escaped_newlines: bool = False) -> str:
    """A PEM block of ``kind`` with a made-up body (not a key): the shape the detectors look for. The markers are
    put together here so that this file itself holds no private key's header."""
    body = base64.b64encode(bytes((seed * 7 + i * 13) % 256 for i in range(600))).decode()
    lines = [f"-----BEGIN {kind}-----", *(body[i:i + 64] for i in range(0, len(body), 64)), f"-----END {kind}-----", ""]
    return ("\\n" if escaped_newlines else "\n").join(lines)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


#: The kubeconfig ``kubectl config view --raw`` writes for a user with a client key (any file name).
_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: {ca}
    server: https://10.0.0.1:6443
  name: prod
contexts:
- context: {{cluster: prod, user: admin}}
  name: prod
current-context: prod
users:
- name: admin
  user:
    {key}: {value}
"""

#: Credentials no name rule knows, only their content (name -> content): one of each kind issue 32 lists.
CONTENT_CREDENTIAL_FILES = {
    "keys/prod": _armored("RSA " + "PRIVATE KEY", 1),
    "keys/deploy": _armored("OPENSSH " + "PRIVATE KEY", 2),
    "keys/pkcs8-encrypted": _armored("ENCRYPTED " + "PRIVATE KEY", 3),
    "gcp/trainer.json": json.dumps({"type": "service_account", "project_id": "p", "private_key_id": "0" * 40,
                                    "private_key": _armored("PRIVATE " + "KEY", 4),
                                    "client_email": "trainer@p.iam.gserviceaccount.com"}, indent=2),
    "deploy/prod-cluster.yaml": _KUBECONFIG.format(ca=_b64("ca"), key="client-key-data",
                                                   value=_b64(_armored("EC " + "PRIVATE KEY", 5))),
    "deploy/ci.kubeconfig": _KUBECONFIG.format(ca=_b64("ca"), key="token", value="abcdef.0123456789abcdef"),
    "deploy/kubeconfig": "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://10.0.0.1:6443'}}]\n"
                         "users: [{name: ci, user: {token: abcdef.0123456789abcdef}}]\n"
                         "contexts: [{name: c, context: {cluster: c, user: ci}}]\ncurrent-context: c\n",
    "deploy/cluster.json": json.dumps({"apiVersion": "v1", "kind": "Config", "clusters": [],
                                       "users": [{"name": "ci", "user": {"auth-provider": {
                                           "name": "oidc", "config": {"refresh-token": "r3fr3sh-t0k3n-0f-the-ci-user"}}}}]},
                                      separators=(",", ":")),
    "registry/auth.json": json.dumps({"auths": {"registry.example.com": {"auth": _b64("robot:s3cr3t-pa55")}}}, indent=1),
    "vault/token": "hv" + "s.CAESIJ7xq2gL0a1b2c3d4e5f6g7h8i9j0kLmNoPqRsTuVwXyZGh4KHGh2cy5BQkNERUZHSElKS0xNTk9QUVJTVFU\n",
    "vault/legacy-token": "s.Ab3dEf6hIj9kLm2nOp5qRs8t\n",
    "db/pgpass": "# host:port:database:user:password\ndb.internal:5432:train:trainer:Zx9!vQ2#\n*:*:*:readonly:r3ad\\:0nly\n",
    "web/htpasswd": "alice:$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/\n"
                    "bob:{SHA}qUqP5cyxm6YcTAhz05Hph5gvu9M=\n"
                    "carol:$2y$05$c4WoMPo3SXsafkva.HHa6uXQZWr7oboPiC2bT/r7q1BB8I2s0BRqC\n",
    "aws_settings.py": "REGION = 'eu-west-1'\nACCESS_KEY_ID = 'AKIA" + "Q3EGRAVF6N2XYZ7P'\n",
}
#: The credentials a name rule knows today (name -> content), with content too, some of the same kinds.
NAMED_CREDENTIAL_FILES = {name: "secret\n" for name in CREDENTIAL_FILES} | {
    ".vault-token": "s.Ab3dEf6hIj9kLm2nOp5qRs8t\n",
    ".pgpass": "localhost:5432:*:postgres:hunter2\n",
    "site/.htpasswd": "alice:$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/\n",
    ".docker/config.json": json.dumps({"auths": {"https://index.docker.io/v1/": {"auth": _b64("me:token")}}}),
}
#: What ships beside them: code and data no rule takes for a credential.
PLAIN_FILES = {
    "train.py": "import os\nprint(os.environ.get('TF_CONFIG'))\n",
    "pem_tools.py": "HEADER = '-----BEGIN CERTIFICATE-----'\n",
    "certs/ca.crt": _armored("CERTIFICATE", 6),
    "deploy/job.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata: {name: train}\n",
    "deploy/empty-kubeconfig.yaml": "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\n",
    "deploy/exec-kubeconfig.yaml": "kind: Config\nusers: [{name: me, user: {exec: {command: gke-gcloud-auth-plugin}}}]\n",
    "docker/config.json": json.dumps({"credHelpers": {"gcr.io": "gcloud"}}),
    "data/rows.csv": "host,port,db\nlocalhost,5432,train\n",
    "data/weights.bin": "".join(map(chr, range(256))) * 4,
}
