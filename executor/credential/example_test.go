package credential_test

import (
	"context"
	"fmt"
	"os"

	"github.com/countersign/countersign/executor/credential"
	"github.com/countersign/countersign/executor/tool"
)

func ExampleAuthority_Mint() {
	dir, _ := os.MkdirTemp("", "countersign-example")
	defer os.RemoveAll(dir)

	a, err := credential.Open(credential.Options{Dir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	tok, err := a.Mint(context.Background(), credential.Claims{
		Subject:  "rep-ana",
		Agent:    "agent-7",
		Audience: "ledger",
		Scope:    "refund",
		Max:      50000,
		Call:     tool.CallHash(tool.IssueRefund, tool.Args{Order: "O-1001", Amount: 3000}),
	})
	fmt.Println(err == nil && tok != "", a.Epoch())

	// Containment: every token minted before this no longer verifies.
	epoch, _ := a.Raise(context.Background())
	fmt.Println(epoch)
	// Output:
	// true 1
	// 2
}
