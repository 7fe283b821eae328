"""Start the test provider: `python -m tests.oidc.provider.serve --dir D --client-id ID
--client-secret SECRET`. Generates its RS256 key, migrates its database, registers the desk
as a confidential client, serves on a free loopback port and prints that port."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--client-secret", required=True)
    options = parser.parse_args()

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (options.dir / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    os.environ["OIDC_PROVIDER_DIR"] = str(options.dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.oidc.provider.settings"

    import django

    django.setup()
    from django.core.management import call_command
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
    from django.core.wsgi import get_wsgi_application
    from oauth2_provider.models import get_application_model

    call_command("migrate", verbosity=0)
    application = get_application_model()
    application.objects.create(
        name="Triage Desk",
        client_id=options.client_id,
        client_secret=options.client_secret,
        client_type=application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=application.GRANT_AUTHORIZATION_CODE,
        algorithm=application.RS256_ALGORITHM,
        redirect_uris="http://127.0.0.1/oidc/callback/",
        skip_authorization=True,
    )
    server = ThreadedWSGIServer(("127.0.0.1", 0), WSGIRequestHandler)
    server.set_app(get_wsgi_application())
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
