package actorcheck_test

import (
	"fmt"

	"github.com/countersign/countersign/executor/sim/actorcheck"
)

// The receiver recomputes the binding from the request it received; a
// token minted for $30 on O-1001 carries the first hash and so cannot pay
// $300.
func ExampleRefundCall() {
	fmt.Println(actorcheck.RefundCall("O-1001", 3000))
	fmt.Println(actorcheck.RefundCall("O-1001", 30000) == actorcheck.RefundCall("O-1001", 3000))
	// Output:
	// 53238c52084c58b6b08f4f8b003be330a393a775e4dfa596bd2634271410ff8d
	// false
}
