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
	key, ok := bearer(r)
	if !ok {
		return nil, newProblem(http.StatusUnauthorized, "Authorization",
			"missing, repeated or malformed Authorization header; send one Authorization: Bearer <tenant key>")
	}
	ts, found := snap.byKey[sha256.Sum256([]byte(key))]
	if !found {
		return nil, newProblem(http.StatusUnauthorized, "Authorization", "unknown API key")
	}
	return ts, nil
}

// bearer returns the token of the request's one "Authorization: Bearer
// <token>" header; false when the header is missing, of another scheme,
// without a token, or given more than once (two keys would otherwise be
// read as the first one's tenant, whichever a proxy put first).
func bearer(r *http.Request) (string, bool) {
	vs := r.Header.Values("Authorization")
	if len(vs) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(vs[0], " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}
