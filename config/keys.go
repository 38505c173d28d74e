package config

import (
	"crypto/sha256"
	"encoding/hex"
)

// HashKey returns the stored form of an API key: "sha256:" and the hex
// SHA-256 of the key. Configuration holds only this form, never the key.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}
