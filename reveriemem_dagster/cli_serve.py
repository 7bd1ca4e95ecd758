"""`reveriemem serve`: the characters of the built books behind an OpenAI-compatible API."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket

import click

API_KEY_ENV = "REVERIEMEM_API_KEY"
DEFAULT_PORT = 8017


def is_loopback(host: str) -> bool:
    """Whether `host` binds only to this machine (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def api_key_for(host: str) -> str | None:
    """The key clients must send: `REVERIEMEM_API_KEY`, required when binding beyond loopback."""
    key = os.environ.get(API_KEY_ENV, "").strip() or None
    if key is None and not is_loopback(host):
        raise click.ClickException(
            f"Serving on {host} reaches beyond this machine: set {API_KEY_ENV} to the key clients must send "
            "(or bind to 127.0.0.1)."
        )
    return key


def check_port_free(host: str, port: int) -> None:
    """Bind `host`:`port` once and let it go, so a port in use is one sentence before anything is announced."""
    try:
        addresses = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as error:
        raise click.ClickException(f"Cannot serve on {host}: it is no address of this machine ({error}).") from None
    family, kind, proto, _, address = addresses[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a closing socket is no obstacle
        try:
            probe.bind(address)
        except OSError as error:
            reason = "is already in use" if error.errno == errno.EADDRINUSE else f"cannot be bound ({error.strerror})"
            raise click.ClickException(f"Port {port} on {host} {reason}; choose another with --port.") from None


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (beyond loopback needs "
              f"${API_KEY_ENV}).")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(1, 65535),
              help="Port to listen on (1-65535).")
@click.option("--lm", default="none", show_default=True,
              help="Model the agents speak with (`none`: the offline path; or any model string `reveriemem --help` names).")
@click.option("--embedder", default="", help="Embedding model (default: the one each memory was built with).")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(min=1),
              help="At most this many Self-Probe rounds per turn.")
def serve(host: str, port: int, lm: str, embedder: str, rounds: int) -> None:
    """Serve every character of the built books as an OpenAI-compatible API (model `book/character`)."""
    import uvicorn

    from reveriemem.serving import ServeConfig, create_app
    from reveriemem.serving.sessions import served_models

    key = api_key_for(host)
    stale: dict[str, str] = {}
    models = served_models(stale=stale)
    if stale and not models:
        raise click.ClickException("; ".join(stale.values()) + ".")
    if not models:
        raise click.ClickException("No book is built yet: run `reveriemem demo` or `reveriemem build BOOK` first.")
    check_port_free(host, port)
    for note in stale.values():
        click.echo(f"warning: {note}; its characters are not served.", err=True)
    app = create_app(ServeConfig(lm=lm, embedder=embedder, rounds=rounds, api_key=key))
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"Serving {len(models)} characters ({', '.join(m.id for m in models[:3])}"
               f"{', ...' if len(models) > 3 else ''}) at http://{shown}:{port}/v1 with model {lm}"
               f"{'; clients must send the API key' if key else ''}. Ctrl-C stops.")
    uvicorn.run(app, host=host, port=port, log_level="warning")
