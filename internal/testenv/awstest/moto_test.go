package awstest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

var env *Moto

func TestMain(m *testing.M) { os.Exit(Main(m, &env)) }

func TestMotoAnswersThroughTheProxy(t *testing.T) {
	c := env.Config(t).SQS()
	name := Name(t, "q")
	before := env.Calls("AmazonSQS.CreateQueue")
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name)}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := env.Calls("AmazonSQS.CreateQueue") - before; got != 4 {
		t.Fatalf("proxy counted %d CreateQueue calls, want 4", got)
	}
}

func TestMissingMotoFailsWithInstallHint(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Start()
	if err == nil || err.Error() != InstallHint {
		t.Fatalf("Start() without moto_server = %v, want the install hint", err)
	}
}

// The patches moto runs with (motopatch/sitecustomize.py) change how fast
// moto answers, never what: motopatch/check.py sends the same requests to
// one moto before and after applying them and compares the answers byte
// for byte (it fails when the names the serializer keeps are off by one,
// or a transformer is dropped). It runs with moto's own interpreter, the
// one moto_server's first line names.
func TestThePatchedMotoAnswersWhatMotoAnswers(t *testing.T) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		t.Fatal(InstallHint)
	}
	script, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(script), "\n")
	interpreter := strings.Fields(strings.TrimPrefix(first, "#!"))
	if len(interpreter) == 0 {
		t.Fatalf("%s does not start with #!<interpreter>", bin)
	}
	cmd := exec.Command(interpreter[0], append(interpreter[1:], filepath.Join("motopatch", "check.py"))...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=check", "AWS_SECRET_ACCESS_KEY=check")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("motopatch/check.py: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
