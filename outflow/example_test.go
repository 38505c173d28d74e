package outflow_test

import (
	"fmt"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/outflow"
)

// A tenant at 10 units/s whose downstream answered 429 a second ago: the
// adaptive rate, halved to 5 then, has recovered by 1 unit/s since, and a
// level of 8 units written then has leaked at the rate of now.
func ExampleLimit_At() {
	lim := outflow.Of(config.Outflow{Rate: 10})
	then := 1_700_000_000_000_000.0 // unix µs
	st := outflow.State{WaterMicro: 8e6, TSMicro: then, Eff: 5, EffTSMicro: then, EffInc: lim.Rate * outflow.AdaptRecovery}
	lv := lim.At(st, then+1e6)
	fmt.Println(lv.Rate, lv.Capacity, lv.Effective, lv.Water)
	// Output: 10 10 6 2
}
