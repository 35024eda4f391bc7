package textclip_test

import (
	"fmt"

	"github.com/agent-worker/agent-worker/internal/textclip"
)

func Example() {
	fmt.Println(textclip.Runes("héllo wörld", 5, "…"))
	fmt.Println(textclip.RunesWithin("héllo wörld", 5, "…"))
	fmt.Println(textclip.Bytes("héllo wörld", 2, " (truncated)"))
	fmt.Println(textclip.BytesWithin("héllo", 5, "…"))
	fmt.Println(textclip.Runes("short", 10, "…"))
	// Output:
	// héllo…
	// héll…
	// h (truncated)
	// h…
	// short
}
