"""Where the viewer serves: ``--viewer.websocket-port`` and ``--viewer.websocket-host`` checked before a command
waits on them (ns-train at launch and at set-up, ns-viewer before it loads the run).

viser starts its server in a thread and the command's main thread waits for it: a port outside 1-65535 killed that
thread with an OverflowError, and a host name that does not resolve left it waiting forever, in both cases while the
command neither served nor exited.
"""

from __future__ import annotations

import socket
from typing import Optional

from ns_splat_plus.errors import UserInputError


def check_viewer_ports(config) -> None:
    """--viewer.websocket-port (and its default) is a TCP port: a number outside 1-65535 stopped the viewer's
    thread with an OverflowError while the run neither trained nor exited."""
    viewer = getattr(config, "viewer", None)
    for option in ("websocket_port", "websocket_port_default"):
        port = getattr(viewer, option, None)
        if port is not None and not (isinstance(port, int) and 1 <= port <= 65535):
            raise UserInputError(
                f"--viewer.{option.replace('_', '-')} {port} is not a TCP port",
                "pass a port from 1 to 65535 (the viewer's default is 7007), or leave the option out",
            )


def check_viewer_host(config) -> None:
    """--viewer.websocket-host is an address the viewer can serve on here: a name that does not resolve left viser
    waiting for its server forever (the command neither served nor exited), and an address of another machine
    printed the viewer's address though nothing served there. Checked by binding a socket to it on a free port;
    only where this process runs the viewer (the host of another node need not be this one's)."""
    host = getattr(getattr(config, "viewer", None), "websocket_host", None)
    runs_a_viewer = getattr(config, "is_viewer_enabled", lambda: True)  # ns-train: global rank 0 with the viewer on
    if not host or not runs_a_viewer():
        return
    what_to_do = (
        "pass 0.0.0.0 (every network interface of this machine, the default), 127.0.0.1 (this machine only) "
        "or an address of this machine"
    )
    try:
        addresses = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as err:
        why = getattr(err, "strerror", None) or str(err)
        raise UserInputError(
            f"--viewer.websocket-host {host} is not a host name or address ({why})", what_to_do
        ) from None
    refused: Optional[OSError] = None
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            try:
                probe.bind((address[0], 0, *address[2:]))  # port 0: a free one, not the viewer's
                return
            except OSError as err:
                refused = err
    why = refused.strerror if refused is not None else "no address"
    raise UserInputError(f"--viewer.websocket-host {host} is not an address of this machine ({why})", what_to_do)
