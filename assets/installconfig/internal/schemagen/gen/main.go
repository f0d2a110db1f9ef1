// Command gen writes schema_gen.go and docs/install-config.md from
// types/types.go and the platforms' sections it imports (schemagen.Load);
// run it with `go generate ./assets/installconfig`.
package main

import (
	"log"
	"os"

	"github.com/kiln-project/kiln/assets/installconfig/internal/schemagen"
)

// Paths relative to assets/installconfig, where go generate runs.
const (
	typesDir    = "types"
	exampleFile = "testdata/minimal.yaml"
	goOut       = "schema_gen.go"
	docsOut     = "../../docs/install-config.md"
)

func main() {
	example, err := os.ReadFile(exampleFile)
	if err != nil {
		log.Fatal(err)
	}
	types, err := schemagen.Load(typesDir)
	if err != nil {
		log.Fatal(err)
	}
	code, err := schemagen.GoTable(types, "installconfig")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(goOut, code, 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(docsOut, schemagen.Markdown(types, example), 0o644); err != nil {
		log.Fatal(err)
	}
}
