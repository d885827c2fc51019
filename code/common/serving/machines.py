"""Which machine a server named in `--endpoints` runs on: names are resolved, so that one server given under two
spellings (localhost and 127.0.0.1, a host name and its address, 0.0.0.0 and the loopback address) is seen as one.

A machine is known by the addresses its name resolves to; every address of this machine (loopback, the wildcard
address a server binds to, the addresses of its own host name, and every address of its network interfaces: its
LAN address, a docker bridge's) is this machine, so a server bound to all interfaces and named by the node's LAN
address and by 127.0.0.1 is one server. Two endpoints are one server when
their machines are one and their ports are equal; the number of machines is what a system's `number_of_nodes`
counts.
"""
from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import UserError

THIS_MACHINE = "this machine"


PROC_IPV4_LOCAL = Path("/proc/net/fib_trie")   # Linux: the kernel's routing table, local addresses marked
PROC_IPV6 = Path("/proc/net/if_inet6")         # Linux: every IPv6 address of every interface
_TRIE_ADDRESS = re.compile(r"^\s*\|--\s+(\d+\.\d+\.\d+\.\d+)\s*$")


def ipv4_local_addresses(fib_trie: str) -> set[str]:
    """The IPv4 addresses /proc/net/fib_trie marks as this host's own (an address line, then `/32 host LOCAL`)."""
    found, last = set(), None
    for line in fib_trie.splitlines():
        address = _TRIE_ADDRESS.match(line)
        if address:
            last = address.group(1)
        elif last is not None and line.strip() == "/32 host LOCAL":
            found.add(last)
    return found


def ipv6_addresses(if_inet6: str) -> set[str]:
    """The IPv6 addresses of /proc/net/if_inet6 (32 hex digits first on each line)."""
    found = set()
    for line in if_inet6.splitlines():
        digits = line.split()[0] if line.split() else ""
        if len(digits) == 32:
            found.add(str(ipaddress.IPv6Address(int(digits, 16))))
    return found


def interface_addresses() -> set[str]:
    """Every address of this machine's network interfaces, as the kernel lists them (the standard library has no
    portable call for it; where /proc does not say, as off Linux, only the host's own names count)."""
    found: set[str] = set()
    for path, read in ((PROC_IPV4_LOCAL, ipv4_local_addresses), (PROC_IPV6, ipv6_addresses)):
        try:
            found |= read(path.read_text())
        except (OSError, ValueError):
            continue
    return found


@lru_cache(maxsize=1)
def _own_addresses() -> frozenset[str]:
    """The addresses of this machine: those of its network interfaces and of its own names (a name that does not
    resolve adds none)."""
    own: set[str] = {_plain(address) for address in interface_addresses()}
    for name in {socket.gethostname(), socket.getfqdn()}:
        try:
            own.update(_plain(info[4][0]) for info in socket.getaddrinfo(name, None, type=socket.SOCK_STREAM))
        except (socket.gaierror, UnicodeError, OSError):
            continue
    return frozenset(own)


def _plain(address: str) -> str:
    """An address as one spelling: IPv4-mapped IPv6 as IPv4, no scope id."""
    parsed = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    return str(parsed)


def _is_local(address: str) -> bool:
    parsed = ipaddress.ip_address(address)
    return parsed.is_loopback or parsed.is_unspecified or address in _own_addresses()


@dataclass(frozen=True)
class Machine:
    """The machine a host name stands for: this one, or the set of addresses it resolves to."""

    addresses: frozenset[str]
    local: bool

    def same(self, other: "Machine") -> bool:
        return (self.local and other.local) or bool(self.addresses & other.addresses)

    @property
    def key(self) -> str:
        """One name for the machine, the same for every spelling of it that resolves alike."""
        return THIS_MACHINE if self.local else min(self.addresses)


@lru_cache(maxsize=256)
def resolve(host: str, flag: str = "--endpoints") -> Machine:
    """The machine `host` names; UserError (exit 2) naming the host when the name does not resolve."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        reason = error.strerror if isinstance(error, socket.gaierror) and error.strerror else str(error)
        raise UserError(f"{flag}: the host name '{host}' does not resolve ({reason}); give a name this machine "
                        f"resolves (see /etc/hosts or DNS) or the server's IP address.") from None
    addresses = frozenset(_plain(info[4][0]) for info in infos)
    return Machine(addresses, any(_is_local(address) for address in addresses))


def machine_key(host: str) -> str:
    """The name of the machine `host` stands for (THIS_MACHINE for a local one); the host itself where it no
    longer resolves (a record read later, elsewhere)."""
    try:
        return resolve(host).key
    except UserError:
        return host


def refuse_aliases(servers: list[tuple[str, str, int]], flag: str = "--endpoints") -> None:
    """`servers`: (as the user spelled it, host, port). UserError (exit 2) naming both spellings when two name one
    server (each would get twice its share of the queries)."""
    seen: list[tuple[str, Machine, int]] = []
    for spelled, host, port in servers:
        machine = resolve(host, flag)
        for earlier, other, other_port in seen:
            if other_port == port and other.same(machine):
                how = "twice" if earlier == spelled else f"twice, as {earlier} and as {spelled}"
                raise UserError(f"{flag} names one server {how} (the same machine and port {port}): it would get "
                                f"twice its share of the queries. Name each server once (a node that runs two "
                                f"servers gives each its own port).")
        seen.append((spelled, machine, port))


def count_machines(hosts: list[str]) -> int:
    """How many distinct machines `hosts` name (at least 1: with none, the inference ran here)."""
    return max(1, len({machine_key(host) for host in hosts}))
