package money_test

import (
	"fmt"

	"github.com/agent-worker/agent-worker/money"
)

// A daily spend of $0.00012 against a ceiling of $0.0001 reads as over it.
func ExampleUSD() {
	fmt.Println("daily", money.USD(0.00012), "of", money.USD(0.0001))
	fmt.Println("session", money.USD(1.5), "of", money.USD(5))
	// Output:
	// daily $0.00012 of $0.0001
	// session $1.50 of $5
}
