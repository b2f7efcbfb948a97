// Command dashgen writes Sundial's Grafana dashboards (package grafana) as
// JSON files into a directory, deploy/grafana/dashboards by default:
//
//	go run ./deploy/grafana/dashgen [-out dir]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sundialhq/sundial/deploy/grafana"
)

func main() {
	out := flag.String("out", "deploy/grafana/dashboards", "directory to write the dashboards to")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "dashgen:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, d := range grafana.All() {
		b, err := d.JSON()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
