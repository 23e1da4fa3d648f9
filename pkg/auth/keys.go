package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// keyPrefix starts every API key this package makes, so a leaked key is recognisable by
// secret scanners.
const keyPrefix = "amk_"

// hashPrefix starts a stored key hash.
const hashPrefix = "sha256:"

// NewKey returns a new random API key (256 bits) and its hash, the only form a configuration
// keeps.
func NewKey() (key, hash string) {
	b := make([]byte, 32)
	rand.Read(b) // never returns an error (crypto/rand)
	key = keyPrefix + base64.RawURLEncoding.EncodeToString(b)
	return key, HashKey(key)
}

// HashKey returns the stored form of an API key, "sha256:" and the hex digest. A fast hash is
// right for API keys: they are random with 256 bits of entropy, so unlike passwords they
// cannot be guessed from a leaked hash, and every call checks one.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hashPrefix + hex.EncodeToString(sum[:])
}

// parseHash decodes a stored key hash.
func parseHash(h string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	hexed, ok := strings.CutPrefix(h, hashPrefix)
	if !ok {
		return sum, fmt.Errorf("must start with %q (make one with `agentmesh keys new`)", hashPrefix)
	}
	raw, err := hex.DecodeString(hexed)
	if err != nil || len(raw) != sha256.Size {
		return sum, errors.New("must be sha256: and 64 hex digits")
	}
	copy(sum[:], raw)
	return sum, nil
}
