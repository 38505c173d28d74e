package ingest

import (
	"crypto/sha256"
	"net/http"
	"strings"
)

// authenticate maps the request's "Authorization: Bearer <key>" to its
// tenant: the key's SHA-256 is looked up in the snapshot's index, which holds
// only hashes (config stores "sha256:<hex>"), so no key is ever compared
// byte by byte and the lookup time says nothing about a stored key. A missing
// header, another scheme, an unknown key and a key of a removed tenant all
// give the same 401, so an answer never reveals which of them it was.
func authenticate(r *http.Request, snap *snapshot) (*tenantState, *problem) {
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	key = strings.TrimSpace(key)
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
		return nil, newProblem(http.StatusUnauthorized, "Authorization",
			"missing or malformed Authorization header; send Authorization: Bearer <tenant key>")
	}
	ts, found := snap.byKey[sha256.Sum256([]byte(key))]
	if !found {
		return nil, newProblem(http.StatusUnauthorized, "Authorization", "unknown API key")
	}
	return ts, nil
}
