// Command elasti-cluster runs the local single-node Kubernetes cluster that
// `make demo` and the end-to-end tests use. See docs/local-cluster.md.
//
//	elasti-cluster up|down|status|images|kubeconfig [--k8s-bin-dir DIR] [--nodes N]
//	elasti-cluster prebuild                            (every image, with no cluster and no Kubernetes binaries yet)
//	elasti-cluster prometheus-stop|prometheus-start   (the optional Prometheus)
//	elasti-cluster node-stop|node-start NODE          (a further node dies, comes back)
//	elasti-cluster rollouts-start                      (Argo Rollouts' controller, from $ELASTI_ARGO_ROLLOUTS_DIR)
//	elasti-cluster keda-start                          (KEDA's operator, from $ELASTI_KEDA_DIR)
//	elasti-cluster traefik-start                       (Traefik and the Gateway API CRDs, from $ELASTI_TRAEFIK_DIR)
//	elasti-cluster snapshot > before.json; elasti-cluster compare before.json
//	elasti-cluster run [--keep] [--images] [--check-clean] [--nodes N] -- COMMAND [ARG...]
//
// run is cluster.Session as a command: it runs COMMAND on the running
// cluster, or brings one up for it and takes it down afterwards (unless
// --keep), with KUBECONFIG set and ELASTI_CLUSTER_TEARDOWN=1 when the
// cluster goes away after COMMAND. It exits with COMMAND's status.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"elasti.dev/elasti/test/cluster"
)

func main() {
	fs := flag.NewFlagSet("elasti-cluster", flag.ExitOnError)
	binDir := fs.String("k8s-bin-dir", os.Getenv("ELASTI_K8S_BIN"), "directory holding etcd and the Kubernetes binaries (default: the output of hack/k8s-binaries.sh)")
	keep := fs.Bool("keep", false, "run: leave a cluster this run brought up running")
	images := fs.Bool("images", false, "run: build and import the images before COMMAND")
	nodes := fs.Int("nodes", 0, "up, run: how many nodes the cluster has (default: $"+cluster.NodesEnv+", else 1); a running cluster with fewer gets the others added, one with more keeps them")
	checkClean := fs.Bool("check-clean", false, "run: after taking down a cluster this run brought up, check the machine is as it was before")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: elasti-cluster up|down|status|images|prebuild|kubeconfig|snapshot|prometheus-start|prometheus-stop [--k8s-bin-dir DIR] [--nodes N]\n       elasti-cluster rollouts-start|keda-start|traefik-start\n       elasti-cluster node-stop|node-start NODE\n       elasti-cluster compare SNAPSHOT.json\n       elasti-cluster run [--keep] [--images] [--check-clean] [--nodes N] [--k8s-bin-dir DIR] -- COMMAND [ARG...]")
		fs.PrintDefaults()
	}
	if len(os.Args) < 2 {
		fs.Usage()
		os.Exit(2)
	}
	verb := os.Args[1]
	if verb == "prometheus-sd" {
		// The cluster's own daemon (see cluster.ServePrometheusSD):
		// prometheus-sd KUBECONFIG ADDRESS.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if len(os.Args) != 4 {
			fs.Usage()
			os.Exit(2)
		}
		if err := cluster.ServePrometheusSD(ctx, os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintf(os.Stderr, "elasti-cluster prometheus-sd: %v\n", err)
			os.Exit(1)
		}
		return
	}
	_ = fs.Parse(os.Args[2:])
	flag.CommandLine = fs
	if *nodes != 0 {
		// The verbs run by `run` are processes of their own: they read it
		// from the environment, as LocalConfig does here.
		os.Setenv(cluster.NodesEnv, strconv.Itoa(*nodes))
	}

	if verb == "run" {
		os.Exit(runSession(*binDir, *keep, *images, *checkClean, fs.Args()))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, verb, *binDir); err != nil {
		fmt.Fprintf(os.Stderr, "elasti-cluster %s: %v\n", verb, err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s elasti-cluster: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, verb, binDir string) error {
	cfg, err := cluster.LocalConfig(binDir)
	if err != nil {
		return err
	}
	switch verb {
	case "up":
		if err := cfg.Up(ctx, logf); err != nil {
			return fmt.Errorf("%w\nlogs are in %s/logs; `make cluster-down` removes what was created", err, cfg.StateDir)
		}
		cfg.PrintUsage(os.Stdout)
		return nil
	case "down":
		return cfg.Down(context.WithoutCancel(ctx), logf)
	case "status":
		return cfg.PrintStatus(ctx, os.Stdout)
	case "prometheus-start":
		return cfg.StartPrometheus(ctx, logf)
	case "prometheus-stop":
		return cfg.StopPrometheus()
	case "images":
		return cfg.BuildImages(ctx, logf)
	case "prebuild":
		return cfg.Prebuild(ctx, logf)
	case "rollouts-start":
		return cfg.StartRollouts(ctx, logf)
	case "keda-start":
		return cfg.StartKEDA(ctx, logf)
	case "traefik-start":
		return cfg.StartTraefik(ctx, logf)
	case "node-stop":
		return cfg.StopNode(ctx, flag.Arg(0))
	case "node-start":
		return cfg.StartNode(ctx, flag.Arg(0), logf)
	case "kubeconfig":
		fmt.Println(cfg.Kubeconfig())
		return nil
	case "snapshot":
		snap, err := cfg.TakeSnapshot()
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(snap)
	case "compare":
		return compare(cfg, flag.Arg(0))
	}
	return fmt.Errorf("unknown command %q", verb)
}

// compare fails when the machine differs from the snapshot in file.
func compare(cfg cluster.Config, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var before cluster.Snapshot
	if err := json.Unmarshal(data, &before); err != nil {
		return err
	}
	after, err := cfg.TakeSnapshot()
	if err != nil {
		return err
	}
	if d := before.Diff(after); len(d) > 0 {
		for _, l := range d {
			fmt.Println(l)
		}
		return errors.New("the machine differs from the snapshot")
	}
	fmt.Println("the machine is as the snapshot recorded it")
	return nil
}

// runSession is the run verb: COMMAND in a cluster.Session whose verbs are
// run by this same binary, in processes of their own.
func runSession(binDir string, keep, images, checkClean bool, command []string) int {
	if len(command) == 0 {
		fmt.Fprintln(os.Stderr, "elasti-cluster run: no command after --")
		return 2
	}
	cfg, err := cluster.LocalConfig(binDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "elasti-cluster run:", err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "elasti-cluster run:", err)
		return 1
	}
	s := cluster.Session{
		Config: cfg, CLI: cfg.CLIRunner(self),
		Keep: keep, Images: images, CheckClean: checkClean,
		Logf: logf,
	}
	code := 0
	err = s.Run(func(teardown bool) error {
		cmd := exec.Command(command[0], command[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cfg.Kubeconfig(), "ELASTI_K8S_BIN="+cfg.BinDir)
		if teardown {
			cmd.Env = append(cmd.Env, cluster.TeardownEnv+"=1")
		}
		// Ctrl-C reaches COMMAND through the terminal's process group;
		// this process waits for it and still takes the cluster down.
		signal.Ignore(os.Interrupt, syscall.SIGTERM)
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
			return nil
		}
		return err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "elasti-cluster run:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
