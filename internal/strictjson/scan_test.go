package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The scanner's tests: it answers only for documents the walk (the Token
// walk Check had before the scanner) finds clean, and it does answer for
// the common ones, allocating nothing.

type fzInner struct {
	Limit  int64         `json:"limit"`
	Period time.Duration `json:"period"`
	Name   string        `json:"name"`
}

type fzEmbed struct {
	E string `json:"e"`
}

type fzDoc struct {
	fzEmbed
	Type    string                         `json:"type"`
	Cost    *int64                         `json:"cost"`
	Payload json.RawMessage                `json:"payload"`
	Any     any                            `json:"any"`
	Inner   fzInner                        `json:"inner"`
	Ptr     *fzInner                       `json:"ptr"`
	List    []fzInner                      `json:"list"`
	Arr     [2]fzInner                     `json:"arr"`
	Types   map[string]fzInner             `json:"types"`
	Nested  map[string][]map[string]*fzDoc `json:"nested"`
	Bytes   []byte                         `json:"bytes"`
	Names   []string                       `json:"names"`
	Self    *fzDoc                         `json:"self"`
	Skip    string                         `json:"-"`
	Dash    string                         `json:"-,"`
	Unicode string                         `json:"ünï"`
	Untag   int
}

// fzJob is shaped like ingest's job request.
type fzJob struct {
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
	ID        *string         `json:"id"`
	Deadline  *string         `json:"deadline"`
	Cost      *int64          `json:"cost"`
	NotBefore *string         `json:"not_before"`
	Delay     *string         `json:"delay"`
	Heartbeat *string         `json:"heartbeat"`
}

type fzBatch struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// fzTree is decoded with mapstructure tags, as tenant specs are.
type fzTree struct {
	Name  string         `mapstructure:"name"`
	Kids  []*fzTree      `mapstructure:"kids"`
	Attrs map[string]any `mapstructure:"attrs"`
}

// fzWide has more fields than the scanner's set of seen fields holds.
var fzWide = func() any {
	fields := make([]reflect.StructField, 70)
	for i := range fields {
		fields[i] = reflect.StructField{Name: "F" + strconv.Itoa(i), Type: reflect.TypeFor[int](), Tag: reflect.StructTag(`json:"f` + strconv.Itoa(i) + `"`)}
	}
	return reflect.New(reflect.StructOf(fields)).Interface()
}()

// fzSchemas are the values and tags the fuzz target checks every input
// against.
var fzSchemas = []struct {
	v   any
	tag string
}{
	{&fzDoc{}, "json"}, {fzJob{}, "json"}, {&fzBatch{}, "json"}, {fzTree{}, "mapstructure"},
	{map[string]fzInner{}, "json"}, {[]fzDoc{}, "json"}, {fzWide, "json"},
	{new(any), "json"}, {0, "json"}, {nil, "json"},
}

// answer is a comparable form of Check's result.
func answer(err error) string {
	var fe *Error
	if errors.As(err, &fe) {
		return fmt.Sprintf("*Error{%q %d}", fe.Path, fe.Kind)
	}
	return fmt.Sprintf("%T %v", err, err)
}

var fzSeeds = []string{
	``, ` `, `{`, `[`, `{}`, `[]`, `null`, `1`, `"x"`, `{"type":"a","cost":1}`,
	`{"type":"email","payload":{"to":"ada@example.com","template":"welcome"}}`,
	`{"jobs":[{"type":"a"},{"type":"b","cost":2}]}`,
	`{"co\u0073t":1}`, `{"cost":1,"co\u0073t":1}`, `{"TYPE":"ok"}`, `{"cost":-1,"cost":1}`,
	`{"inner":{"limit":1,"Period":"1s"}}`, `{"list":[{"limit":1},{"limit":1,"x":2}]}`,
	`{"types":{"a":{},"a":{}}}`, `{"types":{"a":{"LIMIT":1}}}`, `{"payload":{"a":1,"a":2}}`,
	`{"any":{"a":1,"a":2}}`, `{"cost":{"a":1,"a":1},"inner":[1,2]}`, `{"payload":1e999,"cost":1,"cost":2}`,
	`[{"x":1}]`, `{"":1}`, `{"list":[{"":1}]}`, `{"e":"x","-":"y","Untag":3,"ünï":"z"}`,
	`{"ünï":1,"ünï":2}`, "{\"\xff\":1}", "{\"payload\":\"\xff\"}", `{"type":"a\u00"}`,
	`{"type" "a"}`, `{"type":1,}`, `{"inner":{"limit":1]}`, `{"type":`, `{"cost":01}`, `{"cost":1.}`,
	`{"cost":-}`, `{"cost":1e+}`, `{"cost":tru}`, `{"cost":truex}`, `{"a":1} trailing`, `[1,]`, `[1 2]`,
	"{\"type\":\"a\tb\"}", `{"x"`, `{"x"garbage`, `{"type":"ok"`, `{"name":"a","kids":[{"kids":[{"Name":"c"}]}]}`,
	`{"attrs":{"x":{"x":1,"x":2}},"name":"n","name":"m"}`, `{"nested":{"k":[{"a":{"self":{"type":1,"Type":2}}}]}}`,
	`{"arr":[{"limit":1},{"limit":2},{"name":"x","name":"y"}]}`, `{"bytes":"AAE=","names":["a","b"]}`,
	`{"f0":1,"f63":2,"f64":3,"f69":4,"f69":5}`, ` {"type" : "a" , "cost" : 2 } `,
	strings.Repeat(`[`, 300) + strings.Repeat(`]`, 300),
	`{"self":` + strings.Repeat(`{"self":`, 300) + `{}` + strings.Repeat(`}`, 301),
}

// FuzzCheck compares Check, on arbitrary input and every schema of
// fzSchemas, with the Token walk alone (Check before the scanner): the
// answers must be the same, and a document the scanner finds clean must be
// one the walk finds clean.
func FuzzCheck(f *testing.F) {
	for _, s := range fzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, sc := range fzSchemas {
			n := schemaOf(reflect.TypeOf(sc.v), sc.tag)
			want := walk(data, n)
			if got := Check(data, sc.v, sc.tag); answer(got) != answer(want) {
				t.Fatalf("Check(%q, %T) = %s, the walk says %s", data, sc.v, answer(got), answer(want))
			}
			if s := (scanner{data: data}); s.clean(n) && want != nil {
				t.Fatalf("the scanner finds %q clean as %T, the walk says %s", data, sc.v, answer(want))
			}
		}
	})
}

// TestScannerAnswers checks which documents the scanner answers for itself
// (the common clean ones) and which it leaves to the walk.
func TestScannerAnswers(t *testing.T) {
	for _, tc := range []struct {
		in    string
		v     any
		clean bool
	}{
		{`{"type":"email","payload":{"to":"ada@example.com","template":"welcome"}}`, fzJob{}, true},
		{` {"type" : "a" , "cost" : 2, "id": null, "payload": [1, -2.5e3, true, false, null, "\u00e9\n"] } x`, fzJob{}, true},
		{`{"jobs":[{"type":"a"},{"type":"b","cost":2}]}`, fzBatch{}, true},
		{`{"types":{"a":{"limit":1},"A":{"period":2}},"ünï":"z","e":"","Untag":1}`, fzDoc{}, true},
		{`{"cost":{"a":1,"a":1},"inner":[1,2],"list":{"x":1},"any":{"a":1,"a":1}}`, fzDoc{}, true},
		{`{"name":"a","kids":[{"name":"b","kids":[]}],"attrs":{"x":{"y":1}}}`, fzTree{}, true},
		{`{"f0":1,"f63":2}`, fzWide, true},
		{`[{"x":1}]`, fzDoc{}, true},
		{`{"f64":1}`, fzWide, false},                                          // past the 64th field
		{`{"co\u0073t":1}`, fzJob{}, false},                                   // escaped key
		{`{"type":"a","type":"b"}`, fzJob{}, false},                           // repeated
		{`{"Type":"a"}`, fzJob{}, false},                                      // unknown
		{`{"types":{"a":{},"a":{}}}`, fzDoc{}, false},                         // repeated map key
		{`{"type":"a"`, fzJob{}, false},                                       // cut
		{`"x"`, fzJob{}, false},                                               // a scalar at the top
		{``, fzJob{}, false},                                                  // empty
		{`{"cost":01}`, fzJob{}, false},                                       // not a JSON number
		{"{\"\xff\":1}", fzDoc{}, false},                                      // invalid UTF-8 in a checked key
		{strings.Repeat(`[`, 300) + strings.Repeat(`]`, 300), fzDoc{}, false}, // deep
		{`{"types":{` + manyKeys(dictKeys+1) + `}}`, fzDoc{}, false},          // a large map
		{`{"types":{` + manyKeys(dictKeys) + `}}`, fzDoc{}, true},
	} {
		tag := "json"
		if _, ok := tc.v.(fzTree); ok {
			tag = "mapstructure"
		}
		n := schemaOf(reflect.TypeOf(tc.v), tag)
		if got := (&scanner{data: []byte(tc.in)}).clean(n); got != tc.clean {
			t.Errorf("scanner.clean(%.60q, %T) = %v, want %v", tc.in, tc.v, got, tc.clean)
		}
		if err := walk([]byte(tc.in), n); tc.clean && err != nil {
			t.Errorf("walk(%.60q, %T) = %v, want nil", tc.in, tc.v, err)
		}
	}
}

func manyKeys(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = `"k` + strconv.Itoa(i) + `":{}`
	}
	return strings.Join(keys, ",")
}

// TestCheckAllocs: a clean document of a cached schema costs no allocation.
func TestCheckAllocs(t *testing.T) {
	body := []byte(`{"type":"email","cost":2,"id":"a-1","payload":{"to":"ada@example.com","n":[1,2.5,{"x":null}]}}`)
	batch := []byte(`{"jobs":[{"type":"a"},{"type":"b","cost":2}]}`)
	req := &fzJob{}
	if err := Check(body, req, "json"); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Check(body, req, "json") }); n != 0 {
		t.Errorf("Check of a clean job: %v allocs, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = Check(batch, &fzBatch{}, "json") }); n != 0 {
		t.Errorf("Check of a clean batch: %v allocs, want 0", n)
	}
}

// TestCheckDeep: nesting past the scanner's bound is the walk's, which
// follows it up to MaxDepth.
func TestCheckDeep(t *testing.T) {
	deep := func(levels int) []byte {
		return []byte(strings.Repeat(`{"kids":[`, levels) + `{}` + strings.Repeat(`]}`, levels))
	}
	if err := Check(deep(scanDepth), fzTree{}, "mapstructure"); err != nil {
		t.Errorf("Check of %d levels = %v, want nil", scanDepth, err)
	}
	if err := Check(deep(MaxDepth/2+1), fzTree{}, "mapstructure"); !errors.Is(err, ErrTooDeep) {
		t.Errorf("Check of %d levels of kids = %v, want ErrTooDeep", MaxDepth/2+1, err)
	}
}
