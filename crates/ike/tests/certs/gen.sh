#!/bin/sh
# Regenerates tern-ike's test certificates, keys and the openssl
# cross-check signatures (run from anywhere; writes beside this script).
# The outputs are committed so tests need no openssl; rerunning changes
# every key, so rerun only to add fixtures, and commit everything.
#
# Chains (CN=tern Test Root CA is ECDSA P-256, self-signed):
#   moon   ECDSA P-256  <- root                     (2 levels; SEC1 key too)
#   sun    ECDSA P-384  <- ecdsa-int (P-384) <- root (ecdsa-with-SHA384)
#   venus  RSA 2048     <- rsa-int (RSA 3072) <- root (sha256WithRSAEncryption)
#   mars   RSA 2048     <- rsa-int               (RSASSA-PSS SHA-256)
#   pluto  Ed25519      <- ed-int (Ed25519) <- root (Ed25519)
#   weak   RSA 1024     <- root                     (refused: too small)
#   expired ECDSA P-256 <- root, valid 2020-01-01 .. 2021-01-01
#   evil   ECDSA P-256  <- CN=Evil CA (not configured anywhere)
#   notca  ECDSA P-256  <- moon (an end entity, not a CA)
set -eu
cd "$(dirname "$0")"
DAYS=36500
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

key() { # name type
	case $2 in
	p256) openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" ;;
	p384) openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-384 -out "$1.key" ;;
	rsa*) openssl genpkey -algorithm RSA -pkeyopt "rsa_keygen_bits:${2#rsa}" -out "$1.key" ;;
	ed25519) openssl genpkey -algorithm ED25519 -out "$1.key" ;;
	esac
}

ca_ext='basicConstraints=critical,CA:TRUE
keyUsage=critical,keyCertSign,cRLSign
subjectKeyIdentifier=hash'

ee_ext() { # name
	printf '%s\n' 'basicConstraints=CA:FALSE' \
		'keyUsage=critical,digitalSignature' \
		"subjectAltName=DNS:$1.tern.test,email:$1@tern.test,IP:192.0.2.$2,IP:2001:db8::$2"
}

# issue name subject issuer-name extfile-contents [sigopts...]
issue() {
	n=$1 subj=$2 iss=$3 ext=$4
	shift 4
	printf '%s\n' "$ext" >"$T/$n.ext"
	openssl req -new -key "$n.key" -subj "$subj" -out "$T/$n.csr"
	openssl x509 -req -in "$T/$n.csr" -CA "$iss.pem" -CAkey "$iss.key" -set_serial "0x$(openssl rand -hex 8)" \
		-days $DAYS -extfile "$T/$n.ext" "$@" -out "$n.pem"
}

key ca p256
openssl req -new -x509 -key ca.key -subj "/O=tern/CN=tern Test Root CA" -days $DAYS \
	-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out ca.pem

key evil-ca p256
openssl req -new -x509 -key evil-ca.key -subj "/O=tern/CN=Evil CA" -days $DAYS \
	-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out evil-ca.pem

key ecdsa-int p384
issue ecdsa-int "/O=tern/CN=tern Test ECDSA Intermediate" ca "$ca_ext" -sha256
key rsa-int rsa3072
issue rsa-int "/O=tern/CN=tern Test RSA Intermediate" ca "$ca_ext" -sha256
key ed-int ed25519
issue ed-int "/O=tern/CN=tern Test Ed25519 Intermediate" ca "$ca_ext" -sha256

key moon p256
issue moon "/O=tern/CN=moon.tern.test" ca "$(ee_ext moon 1)" -sha256
key sun p384
issue sun "/O=tern/CN=sun.tern.test" ecdsa-int "$(ee_ext sun 2)" -sha384
key venus rsa2048
issue venus "/O=tern/CN=venus.tern.test" rsa-int "$(ee_ext venus 3)" -sha256
key mars rsa2048
issue mars "/O=tern/CN=mars.tern.test" rsa-int "$(ee_ext mars 4)" -sha256 \
	-sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:digest -sigopt rsa_mgf1_md:sha256
key pluto ed25519
issue pluto "/O=tern/CN=pluto.tern.test" ed-int "$(ee_ext pluto 5)"
key weak rsa1024
issue weak "/O=tern/CN=weak.tern.test" ca "$(ee_ext weak 6)" -sha256
key evil p256
issue evil "/O=tern/CN=moon.tern.test" evil-ca "$(ee_ext moon 1)" -sha256
key notca p256
issue notca "/O=tern/CN=notca.tern.test" moon "$(ee_ext notca 7)" -sha256

# Expired: openssl x509 cannot back-date, openssl ca can.
key expired p256
mkdir -p "$T/db/new"
: >"$T/db/index.txt"
echo 01 >"$T/db/serial"
cat >"$T/ca.cnf" <<CNF
[ca]
default_ca = test
[test]
dir = $T/db
database = \$dir/index.txt
new_certs_dir = \$dir/new
serial = \$dir/serial
default_md = sha256
policy = any
copy_extensions = none
x509_extensions = ee
[any]
organizationName = optional
commonName = supplied
[ee]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
subjectAltName = DNS:expired.tern.test
CNF
openssl req -new -key expired.key -subj "/O=tern/CN=expired.tern.test" -out "$T/expired.csr"
openssl ca -batch -config "$T/ca.cnf" -cert ca.pem -keyfile ca.key -in "$T/expired.csr" \
	-startdate 20200101000000Z -enddate 20210101000000Z -notext -out expired.pem 2>/dev/null

# Depth: deep1..deep4 are CAs in a line below the root; deep5 (an end
# entity under four intermediates) is one too deep, deep4-ee (under
# three) is not. Path length: plen allows no CA below it, plen-sub is one.
prev=ca
for i in 1 2 3 4; do
	key deep$i p256
	issue deep$i "/O=tern/CN=tern Test Deep $i" $prev "$ca_ext" -sha256
	prev=deep$i
done
key deep5 p256
issue deep5 "/O=tern/CN=deep5.tern.test" deep4 "$(ee_ext deep5 8)" -sha256
key deep4-ee p256
issue deep4-ee "/O=tern/CN=deep4-ee.tern.test" deep3 "$(ee_ext deep4-ee 9)" -sha256
cat deep5.pem deep4.pem deep3.pem deep2.pem deep1.pem >deep5-chain.pem
cat deep4-ee.pem deep3.pem deep2.pem deep1.pem >deep4-ee-chain.pem
key plen p256
issue plen "/O=tern/CN=tern Test Path Length 0" ca "$ca_ext
basicConstraints=critical,CA:TRUE,pathlen:0" -sha256
key plen-sub p256
issue plen-sub "/O=tern/CN=tern Test Below Path Length 0" plen "$ca_ext" -sha256
key plen-ee p256
issue plen-ee "/O=tern/CN=plen-ee.tern.test" plen-sub "$(ee_ext plen-ee 10)" -sha256
cat plen-ee.pem plen-sub.pem plen.pem >plen-ee-chain.pem

# Extensions: an unknown critical one (refused); name constraints on an
# intermediate, which nc-ee keeps to and nc-out (DNS outside), nc-bad
# (DNS excluded) and nc-ip (an address outside) do not.
key critical p256
issue critical "/O=tern/CN=critical.tern.test" ca "$(ee_ext critical 11)
1.3.6.1.4.1.99999.1=critical,ASN1:UTF8String:must be understood" -sha256
key nc-int p256
issue nc-int "/O=tern/CN=tern Test Name Constraints" ca "$ca_ext
nameConstraints=critical,permitted;DNS:.tern.test,permitted;email:tern.test,permitted;IP:192.0.2.0/255.255.255.0,permitted;IP:2001:db8::/ffff:ffff::,excluded;DNS:bad.tern.test" -sha256
nc_ee() { # name SAN
	key "$1" p256
	issue "$1" "/O=tern/CN=$1.tern.test" nc-int "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
subjectAltName=$2" -sha256
	cat "$1.pem" nc-int.pem >"$1-chain.pem"
}
nc_ee nc-ee "DNS:nc-ee.tern.test,email:nc-ee@tern.test,IP:192.0.2.12,IP:2001:db8::12"
nc_ee nc-out "DNS:nc-out.example,email:nc-out@tern.test"
nc_ee nc-bad "DNS:x.bad.tern.test"
nc_ee nc-ip "DNS:nc-ip.tern.test,IP:198.51.100.1"

# Other key encodings: SEC1 ("EC PRIVATE KEY") and PKCS#1 ("RSA PRIVATE KEY").
openssl ec -in moon.key -out moon.sec1.key 2>/dev/null
openssl rsa -in venus.key -traditional -out venus.pkcs1.key 2>/dev/null

# Chains as a peer sends them (end entity first) and as `certificate` files.
cat sun.pem ecdsa-int.pem >sun-chain.pem
cat venus.pem rsa-int.pem >venus-chain.pem
cat mars.pem rsa-int.pem >mars-chain.pem
cat pluto.pem ed-int.pem >pluto-chain.pem

# Signatures by an independent implementation over a fixed message, which
# tern must verify (tests/pubkey.rs): DER ECDSA, PKCS#1 v1.5, PSS with a
# salt the size of the hash, Ed25519 over the message itself.
printf 'tern-ike RFC 7427 cross-check: signed octets' >msg.bin
openssl dgst -sha256 -sign moon.key -out msg.moon.sig msg.bin
openssl dgst -sha384 -sign sun.key -out msg.sun.sig msg.bin
openssl dgst -sha256 -sign venus.key -out msg.venus.sig msg.bin
openssl dgst -sha256 -sign mars.key -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:digest \
	-sigopt rsa_mgf1_md:sha256 -out msg.mars.sig msg.bin
openssl pkeyutl -sign -rawin -inkey pluto.key -in msg.bin -out msg.pluto.sig
# Other hashes a peer may pick from tern's SIGNATURE_HASH_ALGORITHMS.
openssl dgst -sha384 -sign moon.key -out msg.moon-sha384.sig msg.bin
openssl dgst -sha512 -sign venus.key -out msg.venus-sha512.sig msg.bin
openssl dgst -sha512 -sign mars.key -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:digest \
	-sigopt rsa_mgf1_md:sha512 -out msg.mars-sha512.sig msg.bin
openssl dgst -sha256 -sign mars.key -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:20 \
	-sigopt rsa_mgf1_md:sha256 -out msg.mars-salt20.sig msg.bin

rm -f ./*.srl
echo "certificates written to $(pwd)"
