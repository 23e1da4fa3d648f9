package grant

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// GenerateKey returns a new Ed25519 key pair for signing grants.
func GenerateKey() (ed25519.PublicKey, ed25519.PrivateKey) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err) // crypto/rand never fails
	}
	return pub, priv
}

// WriteKeys writes the key pair as new PEM files: the private key (PKCS #8, mode 0600) to
// privPath and the public key (PKIX, mode 0644) to pubPath. It replaces no file and writes
// through no symbolic link: either path naming one is an error, and the private key goes
// nowhere another user prepared for it.
func WriteKeys(privPath, pubPath string, pub ed25519.PublicKey, priv ed25519.PrivateKey) error {
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return err
	}
	privPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER})
	if err := create(privPath, privPEM, 0o600); err != nil {
		return err
	}
	return create(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
}

// create writes data to a new file path with mode perm; an existing path, a symbolic link
// included, is an error.
func create(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

// LoadSigner reads a PEM PKCS #8 Ed25519 private key.
func LoadSigner(path string) (*Signer, error) {
	der, err := readPEM(path, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	priv, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: a %T, not an Ed25519 private key", path, key)
	}
	return NewSigner(priv), nil
}

// LoadVerifier reads the PEM PKIX Ed25519 public keys in path: one, or several while the
// signing key is rotated (the new key's and the old's, concatenated), each verifying what it
// signed (a grant names its key by KeyID). A block of another type, or none, is an error.
func LoadVerifier(path string) (*Verifier, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys []ed25519.PublicKey
	for rest := raw; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("%s: a PEM %q block; want only \"PUBLIC KEY\" blocks",
				path, block.Type)
		}
		key, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: key %d: %w", path, len(keys)+1, err)
		}
		pub, ok := key.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("%s: key %d: a %T, not an Ed25519 public key",
				path, len(keys)+1, key)
		}
		keys = append(keys, pub)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: want a PEM \"PUBLIC KEY\" block", path)
	}
	return NewVerifier(keys...), nil
}

// readPEM returns the DER bytes of the one PEM block of the given type in path.
func readPEM(path, blockType string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != blockType {
		return nil, fmt.Errorf("%s: want a PEM %q block", path, blockType)
	}
	return block.Bytes, nil
}
