# Checks that sitecustomize.py changes nothing moto answers: the same
# requests against one in-process moto, before and after the patches are
# applied, give the same bytes (the request ids aside). Run by awstest's
# TestThePatchedMotoAnswersWhatMotoAnswers with moto's interpreter.
import os
import re
import sys

import boto3
from moto import mock_aws

if any(type(f).__name__ == "_PatchOnImport" for f in sys.meta_path):
    sys.exit("run check.py without motopatch on PYTHONPATH: it applies the patches itself")
os.environ["GHR_MOTOPATCH_CHECK"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sitecustomize as patches  # noqa: E402  (the patches, not applied by this import)

REQUEST_ID = re.compile(rb"<requestId>[^<]*</requestId>|<RequestId>[^<]*</RequestId>")


def update(ddb):
    """An update that changes the item the first time only."""
    ddb.update_item(TableName="t", Key={"pk": {"S": "a"}, "sk": {"S": "1"}}, UpdateExpression="SET #x = :v",
                    ConditionExpression="attribute_exists(pk)", ExpressionAttributeNames={"#x": "x"},
                    ExpressionAttributeValues={":v": {"M": {"n": {"N": "2"}, "l": {"L": [{"NULL": True}, {"S": "z"}]}}}}, ReturnValues="ALL_NEW")


def answers(ec2, ddb):
    """The raw answers to a fixed set of requests, in order."""
    out = []

    def keep(http_response, **_):
        out.append(REQUEST_ID.sub(b"", http_response.content))

    for c in (ec2, ddb):
        c.meta.events.register("after-call.*.*", keep)
    env = [{"Name": "tag:ghr:environment", "Values": ["e1"]}]
    ec2.describe_instances(Filters=env + [{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}])
    ec2.describe_instances(Filters=env + [{"Name": "instance-state-name", "Values": ["terminated"]}])
    ec2.describe_instances(Filters=[{"Name": "tag:ghr:pool", "Values": ["lin*"]}, {"Name": "tag-key", "Values": ["ghr:orphan"]}])
    ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [ids[0]]}])
    ec2.describe_images(Filters=[{"Name": "architecture", "Values": ["arm64"]}])
    ec2.describe_launch_templates()
    ec2.describe_subnets()
    ddb.get_item(TableName="t", Key={"pk": {"S": "a"}, "sk": {"S": "1"}})
    ddb.query(TableName="t", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "a"}})
    ddb.describe_table(TableName="t")
    update(ddb)
    ddb.batch_get_item(RequestItems={"t": {"Keys": [{"pk": {"S": "a"}, "sk": {"S": "1"}}, {"pk": {"S": "a"}, "sk": {"S": "2"}}]}})
    for c in (ec2, ddb):
        c.meta.events.unregister("after-call.*.*", keep)
    return out


with mock_aws():
    ec2 = boto3.client("ec2", region_name="us-east-1")
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ami = ec2.describe_images(Filters=[{"Name": "architecture", "Values": ["x86_64"]}])["Images"][0]["ImageId"]
    tags = [{"Key": "ghr:environment", "Value": "e1"}, {"Key": "ghr:pool", "Value": "linux"}]
    ids = []
    for i in range(4):
        t = tags + ([{"Key": "ghr:orphan", "Value": "x"}] if i == 3 else [])
        r = ec2.run_instances(ImageId=ami, MinCount=1, MaxCount=1, InstanceType="c7i.large",
                              TagSpecifications=[{"ResourceType": "instance", "Tags": t}])
        ids.append(r["Instances"][0]["InstanceId"])
    ec2.terminate_instances(InstanceIds=[ids[1]])
    ec2.stop_instances(InstanceIds=[ids[2]])
    ec2.create_launch_template(LaunchTemplateName="tmpl", LaunchTemplateData={"ImageId": ami})
    ddb.create_table(TableName="t", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
                     BillingMode="PAY_PER_REQUEST")
    ddb.put_item(TableName="t", Item={"pk": {"S": "a"}, "sk": {"S": "1"}, "m": {"M": {"x": {"N": "1"}, "l": {"L": [{"S": "y"}]}}}, "b": {"BOOL": True}})
    ddb.put_item(TableName="t", Item={"pk": {"S": "a"}, "sk": {"S": "2"}, "ss": {"SS": ["p", "q"]}})
    update(ddb)

    import moto.core.serialize
    if moto.core.serialize.ResponseSerializer.get_value.__name__ == "get_value_fast":
        sys.exit("moto is patched already: there is nothing to compare with")
    before = answers(ec2, ddb)
    import moto.core.serialize
    import moto.ec2.utils
    patches._patch_serialize(moto.core.serialize)
    patches._patch_ec2_utils(moto.ec2.utils)
    if moto.core.serialize.ResponseSerializer.get_value.__name__ != "get_value_fast":
        sys.exit("the serializer patch did not apply")
    after = answers(ec2, ddb)
    after_again = answers(ec2, ddb)  # from the kept names

if len(before) != 12 or before != after or before != after_again:
    for i, (b, a) in enumerate(zip(before, after)):
        if b != a:
            sys.stderr.write("answer %d differs:\n--- moto\n%s\n--- patched\n%s\n" % (i, b[:2000], a[:2000]))
    sys.exit("the patched moto answers differently (%d answers, %d after)" % (len(before), len(after)))
print("ok: %d answers the same" % len(before))
