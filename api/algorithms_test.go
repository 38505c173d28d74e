package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/limits"
)

// TestAlgorithmEnumIsLimitsList: the spec's admission algorithm enum is
// limits.Algorithms (the one list), in its order.
func TestAlgorithmEnumIsLimitsList(t *testing.T) {
	s := loadSpec(t)
	adm, err := s.ref(map[string]any{"$ref": "#/components/schemas/Admission"})
	if err != nil {
		t.Fatal(err)
	}
	props, _ := adm["properties"].(map[string]any)
	alg, _ := props["algorithm"].(map[string]any)
	var got []string
	for _, v := range list(alg["enum"]) {
		s, _ := v.(string)
		got = append(got, s)
	}
	want := make([]string, len(limits.Algorithms))
	for i, a := range limits.Algorithms {
		want[i] = string(a)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("openapi.yaml Admission.algorithm enum differs from limits.Algorithms (-limits +spec):\n%s", diff)
	}
}
