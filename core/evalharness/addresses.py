"""Network addresses: whether a host a server binds or a client dials stays on this machine
(``traces receive`` and the Ray executor warn or refuse otherwise)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether ``host`` only reaches this machine (IPv6 hosts may keep their brackets).

    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("::1"), is_loopback("[::1]")
    (True, True, True, True)
    >>> is_loopback("0.0.0.0"), is_loopback("192.168.1.20"), is_loopback(""), is_loopback("gpu-box")
    (False, False, False, False)
    """
    host = host.strip("[]")
    if host == "localhost" or host.endswith(".localhost"):  # RFC 6761: always loopback
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
