package auth

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// ErrRevoked is wrapped by the error that refuses a certificate a CRL lists.
var ErrRevoked = errors.New("certificate revoked")

// CRLError is a file of CRLs that cannot be used: it does not read, holds no CRL, holds one
// that does not parse, or one that no CA of its CA file signed.
type CRLError struct {
	// File is the file of CRLs.
	File string
	// Err says what is wrong.
	Err error
}

// Error names the file and says what is wrong.
func (e *CRLError) Error() string { return e.File + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *CRLError) Unwrap() error { return e.Err }

// pemCRL is the type of a PEM block holding a CRL (RFC 7468).
const pemCRL = "X509 CRL"

// ParseCRLs parses a file of certificate revocation lists: PEM, one or more "X509 CRL" blocks
// (text between them, as `openssl crl -text` writes, is skipped), or one DER CRL. A file that
// holds none, a PEM block of another type and a CRL that does not parse are errors. It checks
// no signature.
func ParseCRLs(data []byte) ([]*x509.RevocationList, error) {
	var lists []*x509.RevocationList
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != pemCRL {
			return nil, fmt.Errorf("a PEM block of type %q, where only %q blocks go", block.Type, pemCRL)
		}
		l, err := x509.ParseRevocationList(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("CRL %d: %w", len(lists)+1, err)
		}
		lists = append(lists, l)
	}
	if len(lists) > 0 {
		return lists, nil
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("it holds no CRL (PEM \"X509 CRL\" blocks or one DER CRL)")
	}
	l, err := x509.ParseRevocationList(data)
	if err != nil {
		return nil, fmt.Errorf("neither PEM \"X509 CRL\" blocks nor a DER CRL: %w", err)
	}
	return []*x509.RevocationList{l}, nil
}

// FormatSerial is a certificate's serial number as OpenSSL shows it (`openssl x509 -serial`,
// `openssl crl -text`): upper-case hexadecimal digits, an even number of them.
func FormatSerial(n *big.Int) string {
	s := strings.ToUpper(new(big.Int).Abs(n).Text(16))
	if len(s)%2 == 1 {
		s = "0" + s
	}
	if n.Sign() < 0 {
		s = "-" + s
	}
	return s
}

// revocations are the certificates that the CRLs of a file revoke, by the CA that signed each
// CRL. A CRL's revocations apply past its NextUpdate, as a revocation never expires: a stale
// CRL is only warned about (warnStale).
type revocations struct {
	file string
	// byCA are the revocations of each CA that signed CRLs, by the CA's public key (a CA is
	// its subject and its public key, both of which the certificates it signed and its CRLs
	// are checked against: ofCA).
	byCA map[string][]*caRevocations

	stale       time.Time // the earliest NextUpdate of the CRLs; zero when none has one
	staleIssuer string    // the issuer of that CRL
	warned      atomic.Bool
}

// caRevocations are the serials that one CA's CRLs list.
type caRevocations struct {
	subject []byte               // the CA's subject, DER
	ca      string               // the CA's subject, for messages
	revoked map[string]time.Time // revoked serial (serialKey) → when
}

// serialKeyBytes is the room serialKey has for a serial number without allocating: RFC 5280
// bounds a serial to 20 octets, and CAs use 16 to 20.
const serialKeyBytes = 32

// serialKey is the key of the serial number n in caRevocations.revoked: a sign byte, then its
// magnitude, big-endian, written into buf when it fits (so that the lookup of every call
// allocates nothing: the compiler does not copy a []byte converted to a string to index a
// map), allocated otherwise.
func serialKey(n *big.Int, buf *[serialKeyBytes]byte) []byte {
	sign := byte(0)
	if n.Sign() < 0 {
		sign = 1
	}
	size := (n.BitLen() + 7) / 8
	if size+1 > len(buf) {
		return append([]byte{sign}, n.Bytes()...)
	}
	key := buf[:size+1]
	key[0] = sign
	n.FillBytes(key[1:])
	return key
}

// ofCA returns the revocations of the CA ca (its subject and public key), nil when no CRL of
// it was loaded. It allocates nothing: it runs for every certificate of a call's chains.
func (r *revocations) ofCA(ca *x509.Certificate) *caRevocations {
	for _, set := range r.byCA[string(ca.RawSubjectPublicKeyInfo)] {
		if bytes.Equal(set.subject, ca.RawSubject) {
			return set
		}
	}
	return nil
}

// pemCertificates are the certificates of the PEM data that parse, as
// x509.CertPool.AppendCertsFromPEM takes them.
func pemCertificates(data []byte) []*x509.Certificate {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return certs
		}
		if block.Type != "CERTIFICATE" || len(block.Headers) != 0 {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			certs = append(certs, c)
		}
	}
}

// loadRevocations reads the CRLs of crlFile, each of which one of the CAs of caPEM (the PEM
// file caFile, for messages) must have signed. It warns once when a CRL is past its NextUpdate.
// Its errors are CRLErrors.
func loadRevocations(crlFile, caFile string, caPEM []byte) (*revocations, error) {
	data, err := os.ReadFile(crlFile)
	if err != nil {
		return nil, &CRLError{File: crlFile, Err: err}
	}
	lists, err := ParseCRLs(data)
	if err != nil {
		return nil, &CRLError{File: crlFile, Err: err}
	}
	cas := pemCertificates(caPEM)
	r := &revocations{file: crlFile, byCA: map[string][]*caRevocations{}}
	for i, l := range lists {
		ca, err := crlSigner(l, cas)
		if err != nil {
			return nil, &CRLError{File: crlFile, Err: fmt.Errorf("the CRL of %q (%d of %d) is not signed by a CA of %s: %w",
				l.Issuer.String(), i+1, len(lists), caFile, err)}
		}
		set := r.ofCA(ca)
		if set == nil {
			set = &caRevocations{subject: ca.RawSubject, ca: ca.Subject.String(), revoked: map[string]time.Time{}}
			key := string(ca.RawSubjectPublicKeyInfo)
			r.byCA[key] = append(r.byCA[key], set)
		}
		// Several CRLs of one CA (a new one appended to the old, a delta) add up: a
		// certificate any of them lists is refused.
		var buf [serialKeyBytes]byte
		for _, e := range l.RevokedCertificateEntries {
			key := string(serialKey(e.SerialNumber, &buf))
			if _, ok := set.revoked[key]; !ok {
				set.revoked[key] = e.RevocationTime
			}
		}
		if !l.NextUpdate.IsZero() && (r.stale.IsZero() || l.NextUpdate.Before(r.stale)) {
			r.stale, r.staleIssuer = l.NextUpdate, l.Issuer.String()
		}
	}
	r.warnStale(time.Now())
	return r, nil
}

// crlSigner is the CA of cas that signed l.
func crlSigner(l *x509.RevocationList, cas []*x509.Certificate) (*x509.Certificate, error) {
	err := errors.New("no CA of that name")
	for _, ca := range cas {
		if !bytes.Equal(ca.RawSubject, l.RawIssuer) {
			continue
		}
		if err = l.CheckSignatureFrom(ca); err == nil {
			return ca, nil
		}
	}
	return nil, err
}

// warnStale logs a warning, once, when now is past the NextUpdate of a CRL: its revocations
// still apply, but a certificate revoked since then is not refused before a new CRL is in the
// file.
func (r *revocations) warnStale(now time.Time) {
	if r.stale.IsZero() || !now.After(r.stale) || !r.warned.CompareAndSwap(false, true) {
		return
	}
	slog.Warn("a CRL is past its next update: its revocations still apply, but certificates revoked since "+
		"are refused only once a new CRL is in the file", "file", r.file, "issuer", r.staleIssuer,
		"next_update", r.stale.UTC().Format(time.RFC3339))
}

// check returns an error wrapping ErrRevoked when a certificate of one of the verified chains
// is listed by a CRL of its issuer (the next certificate of the chain); nil for no chains (no
// certificate presented) and for r nil (no CRLs). Every chain counts, not only one: where the
// CA file holds an intermediate CA beside its root (for the intermediate's own CRLs), a chain
// ends at each, and the intermediate revoked by the root's CRL is refused still.
func (r *revocations) check(chains [][]*x509.Certificate) error {
	if r == nil {
		return nil
	}
	r.warnStale(time.Now())
	return r.listed(chains)
}

// listed is check without the warning of a stale CRL: the check of a call on a connection
// whose handshake checked its chains already, and of the calls held, which allocates nothing
// unless a certificate is revoked (a map lookup per certificate of the chains).
func (r *revocations) listed(chains [][]*x509.Certificate) error {
	if r == nil {
		return nil
	}
	for _, chain := range chains {
		if err := r.checkChain(chain); err != nil {
			return err
		}
	}
	return nil
}

// checkChain returns the error of the first certificate of chain that the CRL of its issuer
// lists.
func (r *revocations) checkChain(chain []*x509.Certificate) error {
	for i := 0; i+1 < len(chain); i++ {
		c := chain[i]
		set := r.ofCA(chain[i+1])
		if set == nil {
			continue
		}
		var buf [serialKeyBytes]byte
		when, ok := set.revoked[string(serialKey(c.SerialNumber, &buf))]
		if !ok {
			continue
		}
		what := certName(c)
		if i > 0 {
			what = fmt.Sprintf("the CA certificate %q in the chain of %s", c.Subject.String(), certName(chain[0]))
		}
		return fmt.Errorf("%w: %s, serial %s, is revoked: the CRL of %q lists it (revoked %s)",
			ErrRevoked, what, FormatSerial(c.SerialNumber), set.ca, when.UTC().Format(time.RFC3339))
	}
	return nil
}

// certName names a certificate in messages: by its mesh identity if it has one, else by its
// subject.
func certName(c *x509.Certificate) string {
	if service, ok := MeshService(c); ok {
		return "the certificate of " + MeshID(service)
	}
	return fmt.Sprintf("the certificate %q", c.Subject.String())
}
