package access_test

import (
	"fmt"

	"github.com/agent-worker/agent-worker/access"
)

// A transport authenticates a presented token against the set in force
// and checks what the operation needs; a rotation replaces the set for
// every transport holding the same Tokens.
func Example() {
	set, err := access.NewSet([]access.Token{
		{Name: "ops", Role: access.RoleOperate, Value: "s3cret"},
		{Name: "dash", Role: access.RoleRead, Value: "r3ad", Agents: []string{"pay-*"}},
	})
	if err != nil {
		panic(err)
	}
	tokens := access.NewTokens(set)

	who, ok := tokens.Load().Authenticate("r3ad")
	fmt.Println(who.Name, ok, access.Read.Allows(who.Role), access.Operate.Allows(who.Role))
	fmt.Println(who.MayAccess("pay-eu"), who.MayAccess("oncall"))
	_, ok = tokens.Load().Authenticate("guess")
	fmt.Println(ok)

	rotated, _ := access.NewSet([]access.Token{{Name: "ops", Role: access.RoleOperate, Value: "n3w"}})
	old := tokens.Load()
	tokens.Replace(rotated)
	<-old.Changed() // closed by Replace
	_, ok = tokens.Load().Authenticate("s3cret")
	fmt.Println(ok, who.ValidIn(tokens.Load()))
	// Output:
	// dash true true false
	// true false
	// false
	// false false
}
