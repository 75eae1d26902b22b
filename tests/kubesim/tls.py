"""The run's PKI: a CA made for each run, the API server's serving certificate, and client certificates whose
subject says who the client is, as the apiserver's x509 authenticator reads it (`CommonNameUserConversion`:
the CN is the user name, each O a group).

EC P-256 keys: generating one takes microseconds, so every run and every test gets its own CA."""
from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
from dataclasses import dataclass
from typing import Iterable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)
# Clocks of clients and the simulator may differ by a little; a certificate must be valid at once for all.
BACKDATE = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, PEM-encoded."""
    cert_pem: bytes
    key_pem: bytes


@dataclass(frozen=True)
class Identity:
    """Who a verified client certificate says the client is."""
    user: str
    groups: tuple[str, ...]


def _name(common_name: str, organizations: Iterable[str] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name(attributes + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _subject_alt_names(hosts: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


class Authority:
    """A self-signed CA that issues the run's serving and client certificates."""

    def __init__(self, common_name: str = "kubesim-ca"):
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        subject = _name(common_name)
        self._cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - BACKDATE).not_valid_after(now + VALIDITY)
                      .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                      .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                   content_commitment=False, key_encipherment=False,
                                                   data_encipherment=False, key_agreement=False,
                                                   encipher_only=False, decipher_only=False), critical=True)
                      .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
                      .sign(self._key, hashes.SHA256()))
        self.cert_pem = self._cert.public_bytes(serialization.Encoding.PEM)

    def _issue(self, subject: x509.Name, usage: x509.ObjectIdentifier,
               alt_names: list[x509.GeneralName] | None = None) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(self._cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - BACKDATE).not_valid_after(now + VALIDITY)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=False,
                                                content_commitment=False, data_encipherment=False,
                                                key_agreement=False, crl_sign=False, encipher_only=False,
                                                decipher_only=False), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                                  critical=False))
        if alt_names:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def serving(self, hosts: Iterable[str]) -> KeyPair:
        """The API server's certificate, valid for 127.0.0.1, localhost and `hosts` (IP or DNS SANs)."""
        return self._issue(_name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH,
                           _subject_alt_names(["127.0.0.1", "localhost", *hosts]))

    def client(self, user: str, groups: Iterable[str] = ()) -> KeyPair:
        """A client certificate for `user` in `groups` (CN and O, as kubeadm's admin.conf carries them)."""
        return self._issue(_name(user, groups), ExtendedKeyUsageOID.CLIENT_AUTH)

    def server_context(self, serving: KeyPair) -> ssl.SSLContext:
        """TLS for the API port: the serving certificate; client certificates are asked for but not required
        (the apiserver's `RequestClientCert`), and verified against this CA."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        load_pair(context, serving)
        context.load_verify_locations(cadata=self.cert_pem.decode())
        context.verify_mode = ssl.CERT_OPTIONAL
        # HTTP/1.1 only: without this, Go clients could not tell; with it they never try HTTP/2
        context.set_alpn_protocols(["http/1.1"])
        return context


def load_pair(context: ssl.SSLContext, pair: KeyPair) -> None:
    """Give `context` a certificate and key; the ssl module reads them only from files, so they go to a private
    directory that is removed at once."""
    with tempfile.TemporaryDirectory(prefix="kubesim-tls-") as directory:
        cert_file, key_file = os.path.join(directory, "tls.crt"), os.path.join(directory, "tls.key")
        write_private(cert_file, pair.cert_pem)
        write_private(key_file, pair.key_pem)
        context.load_cert_chain(cert_file, key_file)


def client_context(ca_pem: bytes, pair: KeyPair | None = None) -> ssl.SSLContext:
    """A client's TLS: trusts the CA `ca_pem`, and presents `pair` when given."""
    context = ssl.create_default_context(cadata=ca_pem.decode())
    if pair is not None:
        load_pair(context, pair)
    return context


def identity(peer_cert: dict | None) -> Identity | None:
    """The user of a verified peer certificate (`SSLSocket.getpeercert()`): CN, and the Os as groups."""
    if not peer_cert:
        return None
    common_names: list[str] = []
    organizations: list[str] = []
    for rdn in peer_cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                common_names.append(value)
            elif key == "organizationName":
                organizations.append(value)
    if not common_names or not common_names[0]:
        return None     # upstream: a certificate without a CN authenticates nobody
    return Identity(common_names[0], tuple(organizations))


def write_private(path: str, data: bytes) -> None:
    """Write `data` readable by the owner only (keys, and kubeconfigs that embed them)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    os.chmod(path, 0o600)
