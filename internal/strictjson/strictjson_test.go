package strictjson_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/strictjson"
)

type inner struct {
	Limit  int64         `json:"limit"`
	Period time.Duration `json:"period"`
}

type doc struct {
	Type    string           `json:"type"`
	Cost    *int64           `json:"cost"`
	Payload json.RawMessage  `json:"payload"`
	Any     any              `json:"any"`
	Inner   inner            `json:"inner"`
	Ptr     *inner           `json:"ptr"`
	List    []inner          `json:"list"`
	Types   map[string]inner `json:"types"`
	Skipped string           `json:"-"`
	Untag   int
	hidden  int
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     *strictjson.Error // nil: no field problem
	}{
		{"exact names", `{"type":"a","cost":1,"inner":{"limit":1},"Untag":1}`, nil},
		{"escaped name is the name", `{"co\u0073t":1}`, nil},
		{"upper case", `{"TYPE":"ok"}`, &strictjson.Error{Path: "TYPE", Kind: strictjson.Unknown}},
		{"mixed case", `{"type":"ok","Cost":1}`, &strictjson.Error{Path: "Cost", Kind: strictjson.Unknown}},
		{"untagged Go name, other case", `{"untag":1}`, &strictjson.Error{Path: "untag", Kind: strictjson.Unknown}},
		{"dash field", `{"Skipped":"x"}`, &strictjson.Error{Path: "Skipped", Kind: strictjson.Unknown}},
		{"unexported field", `{"hidden":1}`, &strictjson.Error{Path: "hidden", Kind: strictjson.Unknown}},
		{"repeated", `{"cost":-1,"cost":1}`, &strictjson.Error{Path: "cost", Kind: strictjson.Repeated}},
		{"nested unknown", `{"inner":{"limit":1,"Period":"1s"}}`, &strictjson.Error{Path: "inner.Period", Kind: strictjson.Unknown}},
		{"pointer", `{"ptr":{"limit":1,"limit":2}}`, &strictjson.Error{Path: "ptr.limit", Kind: strictjson.Repeated}},
		{"list element", `{"list":[{"limit":1},{"limit":1,"x":2}]}`, &strictjson.Error{Path: "list[1].x", Kind: strictjson.Unknown}},
		{"map keys are free", `{"types":{"Encode":{"limit":1},"encode":{"limit":2}}}`, nil},
		{"map value", `{"types":{"encode":{"LIMIT":1}}}`, &strictjson.Error{Path: "types.encode.LIMIT", Kind: strictjson.Unknown}},
		{"repeated map key", `{"types":{"a":{},"a":{}}}`, &strictjson.Error{Path: "types.a", Kind: strictjson.Repeated}},
		{"payload is free", `{"payload":{"Any":1,"Any":2,"x":[{"y":1,"y":1}]}}`, nil},
		{"interface is free", `{"any":{"a":1,"a":2}}`, nil},
		{"wrong JSON type is left to the decoder", `{"cost":{"a":1,"a":1},"inner":[1,2]}`, nil},
		{"null", `{"inner":null,"ptr":null,"list":null}`, nil},
		{"huge number", `{"payload":1e999,"cost":1,"cost":2}`, &strictjson.Error{Path: "cost", Kind: strictjson.Repeated}},
		{"not an object at the top", `[{"x":1}]`, nil},
		{"repeat after payload", `{"payload":{"cost":1},"cost":1,"cost":2}`, &strictjson.Error{Path: "cost", Kind: strictjson.Repeated}},
		{"member named empty", `{"":1,"type":"ok"}`, &strictjson.Error{Path: `""`, Kind: strictjson.Unknown}},
		{"nested member named empty", `{"list":[{"":1}]}`, &strictjson.Error{Path: `list[0].""`, Kind: strictjson.Unknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := strictjson.Check([]byte(tc.in), &doc{}, "json")
			var got *strictjson.Error
			if err != nil && !errors.As(err, &got) {
				t.Fatalf("Check(%s) = %v, want a field problem or nil", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Check(%s) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// TestCheckMalformed checks that malformed JSON is the decoder's error, not
// a field problem and not nil.
func TestCheckMalformed(t *testing.T) {
	for _, in := range []string{``, `{"type":`, `{"type" "a"}`, `{"type":1,}`, `{"inner":{"limit":1]}`} {
		err := strictjson.Check([]byte(in), doc{}, "json")
		var fe *strictjson.Error
		if err == nil || errors.As(err, &fe) {
			t.Errorf("Check(%q) = %v, want a syntax error", in, err)
		}
		if in == "" && !errors.Is(err, io.EOF) {
			t.Errorf("Check(\"\") = %v, want io.EOF", err)
		}
		if in == `{"type":` && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("Check(%q) = %v, want io.ErrUnexpectedEOF", in, err)
		}
	}
}

// TestCheckOtherTag checks field names of another tag (mapstructure, as the
// tenant spec uses) and the recursion of a self-containing type.
func TestCheckOtherTag(t *testing.T) {
	type node struct {
		Name string  `mapstructure:"name"`
		Kids []*node `mapstructure:"kids"`
	}
	err := strictjson.Check([]byte(`{"name":"a","kids":[{"name":"b","kids":[{"Name":"c"}]}]}`), node{}, "mapstructure")
	want := &strictjson.Error{Path: "kids[0].kids[0].Name", Kind: strictjson.Unknown}
	var got *strictjson.Error
	errors.As(err, &got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Check (-want +got):\n%s", diff)
	}
}

func ExampleCheck() {
	type job struct {
		Type string `json:"type"`
		Cost int64  `json:"cost"`
	}
	for _, body := range []string{`{"type":"ok","cost":1}`, `{"TYPE":"ok"}`, `{"cost":-1,"cost":1}`} {
		fmt.Println(strictjson.Check([]byte(body), job{}, "json"))
	}
	// Output:
	// <nil>
	// unknown field "TYPE"
	// repeated field "cost"
}

func BenchmarkCheck(b *testing.B) {
	body := []byte(`{"type":"email","cost":2,"any":"x","payload":{"to":"a@example.com","n":[1,2,3]}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := strictjson.Check(body, doc{}, "json"); err != nil {
			b.Fatal(err)
		}
	}
}
