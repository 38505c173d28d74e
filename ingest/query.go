package ingest

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// query reads the parameters of one request's URL, parsed once. A parameter
// given more than once (?limit=1&limit=2) is a 400 naming it: which one the
// client meant is a guess, and net/url's Get would take the first.
type query struct{ v url.Values }

func queryOf(r *http.Request) query { return query{r.URL.Query()} }

// get returns the value of name, "" when absent, or the 400 of a repeated
// parameter.
func (q query) get(name string) (string, *problem) {
	vs := q.v[name]
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", newProblem(http.StatusBadRequest, name, fmt.Sprintf("%s is given %d times; give it once", name, len(vs)))
}

// limit returns the parameter limit, an integer from 1 to most; def when
// absent or empty.
func (q query) limit(def, most int) (int, *problem) {
	v, p := q.get("limit")
	if p != nil || v == "" {
		return def, p
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return def, newProblem(http.StatusBadRequest, "limit", fmt.Sprintf("limit must be an integer from 1 to %d (got %q)", most, v))
	}
	return n, nil
}
