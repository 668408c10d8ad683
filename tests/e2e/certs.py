"""A test certificate authority, made with the ``cryptography`` package: a CA, a server
certificate for 127.0.0.1 / localhost, a client certificate it signed, and a client
certificate from another CA (which an mTLS server must refuse). PEM files in a folder."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

Key = ec.EllipticCurvePrivateKey


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: str, issuer: x509.Name, public: ec.EllipticCurvePublicKey
             ) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer)
            .public_key(public).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1)))


def _authority(common_name: str) -> tuple[x509.Certificate, Key]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (_builder(common_name, _name(common_name), key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return cert, key


def _leaf(common_name: str, ca: tuple[x509.Certificate, Key], server: bool
          ) -> tuple[x509.Certificate, Key]:
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (_builder(common_name, ca_cert.subject, key.public_key())
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                   ca_key.public_key()), critical=False))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def _write(folder: Path, stem: str, pair: tuple[x509.Certificate, Key]) -> tuple[Path, Path]:
    cert, key = pair
    cert_path, key_path = folder / f"{stem}.pem", folder / f"{stem}-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@dataclass
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path  # signed by ``ca``
    client_key: Path
    rogue_cert: Path  # signed by another CA
    rogue_key: Path

    def server_flags(self, cert_reqs: int = 0) -> tuple[str, ...]:
        """The vrs options that serve HTTPS with these files."""
        flags = ("--ssl-certfile", str(self.server_cert), "--ssl-keyfile", str(self.server_key))
        if cert_reqs:
            flags += ("--ssl-ca-certs", str(self.ca), "--ssl-cert-reqs", str(cert_reqs))
        return flags

    def client(self, cert: str | None = None) -> ssl.SSLContext:
        """A client context trusting ``ca``; ``cert`` "client" or "rogue" presents one."""
        context = ssl.create_default_context(cafile=str(self.ca))
        if cert == "client":
            context.load_cert_chain(self.client_cert, self.client_key)
        elif cert == "rogue":
            context.load_cert_chain(self.rogue_cert, self.rogue_key)
        return context


def make_certs(folder: Path) -> Certs:
    ca = _authority("vrs test CA")
    ca_path = folder / "ca.pem"
    ca_path.write_bytes(ca[0].public_bytes(serialization.Encoding.PEM))
    server = _write(folder, "server", _leaf("127.0.0.1", ca, server=True))
    client = _write(folder, "client", _leaf("vrs test client", ca, server=False))
    rogue = _write(folder, "rogue", _leaf("rogue client", _authority("rogue CA"), server=False))
    return Certs(ca_path, *server, *client, *rogue)
