package guard_test

import (
	"fmt"

	"github.com/fencing/fencing/host/packages/go/guard"
)

// A client paused past its lease presents token 33 after the new holder
// wrote with 34: the guard refuses it, with the evidence.
func ExampleGuard_Admit() {
	g, err := guard.New()
	if err != nil {
		panic(err)
	}
	defer g.Close()
	fence := &guard.Fence{Lock: "orders", HighWater: 34}
	d, err := g.Admit(fence, guard.Sequencer{Lock: "orders", Token: 33}, guard.NonDecreasing)
	if err != nil {
		panic(err) // not decided: refuse the write
	}
	fmt.Println(d.Verdict, d.Presented, d.HighWater, d.Admitted())
	// Output: stale_token 33 34 false
}
