package awstest

import (
	"context"
	"os"
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
