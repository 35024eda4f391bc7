// Package alerting is the end-to-end test of the alerting path into
// agent-worker: a real Prometheus evaluates alert rules on an exporter the
// test controls and scrapes the worker's /metrics, a real Alertmanager
// groups the alerts and posts them to the worker's receiver (POST
// /v1/alertmanager/{agent}), and the worker, started in-process on a
// scripted model, runs the turns. The package has no code outside its
// tests; testdata/alertmanager.yml is the receiver configuration that
// docs/alertmanager.md shows.
package alerting
