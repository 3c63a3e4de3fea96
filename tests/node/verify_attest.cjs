// Verifies EAS off-chain attestations with the EAS SDK, as any holder of one would.
// stdin: {"attester": address, "domain": {"address", "version", "chainId"}, "attestations":
//   [sig objects as the service serves them], "recomputeUid": bool}
// stdout: {"results": [true|false...], "decoded": [[{name, value}...]...]}: one verdict per
// attestation (an exception counts as false) and its data decoded with the schema.
// With recomputeUid, each uid is first replaced by the SDK's UID of its message, so that a
// changed field must be caught by the signature, not only by the UID.
'use strict';
const {
  Offchain, OffchainAttestationVersion, SchemaEncoder,
} = require('@ethereum-attestation-service/eas-sdk');

const SCHEMA = 'string entityId,string entityName,string levelId,string levelName,uint64 reachedAt';

let input = '';
process.stdin.on('data', (d) => { input += d; });
process.stdin.on('end', () => {
  const req = JSON.parse(input);
  const offchain = new Offchain({
    address: req.domain.address, version: req.domain.version, chainId: BigInt(req.domain.chainId),
  }, OffchainAttestationVersion.Version2);
  const encoder = new SchemaEncoder(SCHEMA);
  const results = [];
  const decoded = [];
  for (const a of req.attestations) {
    let ok = false;
    try {
      if (req.recomputeUid) {
        const m = a.message;
        a.uid = Offchain.getOffchainUID(2, m.schema, m.recipient, m.time, m.expirationTime,
          m.revocable, m.refUID, m.data, m.salt);
      }
      ok = offchain.verifyOffchainAttestationSignature(req.attester, a) === true;
    } catch (e) {
      ok = false;
    }
    results.push(ok);
    try {
      decoded.push(encoder.decodeData(a.message.data).map((f) => ({
        name: f.name, value: typeof f.value.value === 'bigint' ? f.value.value.toString() : f.value.value,
      })));
    } catch (e) {
      decoded.push(null);
    }
  }
  process.stdout.write(JSON.stringify({ results, decoded }));
});
