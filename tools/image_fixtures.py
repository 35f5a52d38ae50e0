"""Reference fixtures for brigade's image input: PNG and JPEG files, transformers' preprocessing of
them, and transformers' image-classification pipeline on a random-init ViT.

Writes (the committed set, `--out tests/fixtures`):
  images/*.png, images/*.jpg   small files of odd sizes, every PNG colour type and bit depth brigade
                               reads (8-bit RGB/RGBA/gray/gray+alpha, palette with 8/4/2/1-bit
                               indices and tRNS, 1-bit gray, 16-bit gray/gray+alpha/RGB/RGBA,
                               Adam7 interlaced) and JPEGs (baseline 4:2:0, 4:2:2, 4:4:4,
                               progressive, grayscale, Adobe CMYK, EXIF orientation 6 and 3; PNGs with eXIf
                               orientations 2, 4, 5, 7, 8)
  images/cases.json            the preprocessor configs (as preprocessor_config.json spells
                               them) and which files each is checked on
  images/expected.safetensors  decoded.<file>: F16 [H, W, 3] (0..255, exact), the RGB image transformers'
                               load_image gives (PIL.Image.open, exif_transpose, convert("RGB"));
                               <case>/<file>: F32 [3, H, W], that image's pixel_values from
                               ViTImageProcessorPil configured as the case says (what
                               pipeline("image-classification") uses when torchvision is absent,
                               as in tools/requirements.txt)
  image_cls_vit/               a random-init ViTForImageClassification (32x32 images, patch 8,
                               6 named labels) with its preprocessor_config.json, and
                               pipeline.json: pipeline("image-classification") on files of
                               images/ with the default arguments, top_k, and function_to_apply
                               "sigmoid" and "none"

Usage:
  tools/.venv/bin/python tools/image_fixtures.py --out tests/fixtures
Regenerating gives byte-identical files for the same library versions (Pillow, transformers).
"""

import argparse
import io
import json
import os
import struct
import zlib

import numpy as np
import PIL
import PIL.Image
import PIL.features
import torch
import transformers
from safetensors.torch import save_file
from transformers.image_utils import load_image

from fixture_common import sort_metadata_keys

SEED = 1414


def field(rng, h, w, channels, depth=255):
    """A smooth random picture (a few waves and a gradient) with a little noise: something JPEG
    and the resampling filters have real work on."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    out = np.empty((h, w, channels))
    for c in range(channels):
        v = np.zeros((h, w))
        for _ in range(3):
            fy, fx, ph = rng.uniform(0.02, 0.35), rng.uniform(0.02, 0.35), rng.uniform(0, 6.3)
            v += np.sin(fy * y + fx * x + ph)
        v = (v / 6 + 0.5) + rng.normal(0, 0.08, (h, w)) + (x / w - 0.5) * rng.uniform(-0.4, 0.4)
        out[..., c] = v
    return np.clip(np.round(out * depth), 0, depth)


# ---- a minimal PNG writer, for what Pillow does not write (16-bit colour, interlacing) -------

def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))


def png_bytes(pixels, color_type, depth, interlace=False, extra=b""):
    """pixels: uint array [H, W, C] (C as color_type needs). Filter 0 ("None") on every row."""
    h, w = pixels.shape[:2]
    dtype = ">u2" if depth == 16 else "u1"

    def row(r):
        if depth >= 8:
            return r.astype(dtype).tobytes()
        bits = np.unpackbits(r.astype(np.uint8).reshape(-1, 1), axis=1)[:, 8 - depth:]  # MSB first
        return np.packbits(bits.reshape(-1)).tobytes()

    def rows(img):
        return b"".join(b"\x00" + row(img[r]) for r in range(img.shape[0]))

    if interlace:
        raw = b""
        for x0, y0, dx, dy in ADAM7:
            sub = pixels[y0::dy, x0::dx]
            if sub.size:
                raw += rows(sub)
    else:
        raw = rows(pixels)
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 1 if interlace else 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + extra + png_chunk(b"IDAT", zlib.compress(raw, 9))
            + png_chunk(b"IEND", b""))


def exif_orientation(value):
    exif = PIL.Image.Exif()
    exif[0x0112] = value
    return exif.tobytes()


def write_images(folder, rng):
    """The committed image files; returns their names in order."""
    os.makedirs(folder, exist_ok=True)
    files = {}

    def pil(name, img, **kw):
        buf = io.BytesIO()
        img.save(buf, format="PNG" if name.endswith(".png") else "JPEG", **kw)
        files[name] = buf.getvalue()

    u8 = lambda a: a.astype(np.uint8)
    pil("rgb_37x23.png", PIL.Image.fromarray(u8(field(rng, 23, 37, 3)), "RGB"))
    pil("rgba_41x29.png", PIL.Image.fromarray(u8(field(rng, 29, 41, 4)), "RGBA"))
    pil("gray_33x47.png", PIL.Image.fromarray(u8(field(rng, 47, 33, 1)[..., 0]), "L"))
    pil("gray_alpha_45x31.png", PIL.Image.fromarray(u8(field(rng, 31, 45, 2)), "LA"))
    # Palettes: 8-bit indices with a tRNS chunk (alpha dropped by convert("RGB")), 4-bit, 2-bit.
    pal = PIL.Image.fromarray(u8(field(rng, 40, 50, 3)), "RGB").quantize(colors=200, dither=PIL.Image.Dither.NONE)
    pil("palette_50x40.png", pal, transparency=bytes([0, 128, 255] + [255] * 5))
    pal4 = PIL.Image.fromarray(u8(field(rng, 19, 27, 3)), "RGB").quantize(colors=16)
    pil("palette4_27x19.png", pal4, bits=4)
    pal2 = PIL.Image.fromarray(u8(field(rng, 21, 30, 3)), "RGB").quantize(colors=4)
    pil("palette2_30x21.png", pal2, bits=2)
    pil("gray1_39x21.png", PIL.Image.fromarray(field(rng, 21, 39, 1)[..., 0] > 127))
    # 16 bits per sample: Pillow keeps the high byte of colour and alpha samples; 16-bit gray
    # opens as I;16, whose convert("RGB") clips at 255 (so half the values here stay below 256).
    g16 = field(rng, 27, 31, 1, depth=511)
    files["gray16_31x27.png"] = png_bytes(g16.astype(np.uint16), 0, 16)
    files["rgb16_43x35.png"] = png_bytes(field(rng, 35, 43, 3, depth=65535).astype(np.uint16), 2, 16)
    files["rgba16_26x33.png"] = png_bytes(field(rng, 33, 26, 4, depth=65535).astype(np.uint16), 6, 16)
    files["gray_alpha16_29x25.png"] = png_bytes(field(rng, 25, 29, 2, depth=65535).astype(np.uint16), 4, 16)
    files["interlaced_rgb_53x41.png"] = png_bytes(u8(field(rng, 41, 53, 3)), 2, 8, interlace=True)
    files["interlaced_gray4_35x22.png"] = png_bytes(field(rng, 22, 35, 1, depth=15), 0, 4, interlace=True)
    files["gray2_23x17.png"] = png_bytes(field(rng, 17, 23, 1, depth=3), 0, 2)

    photo = lambda h, w: PIL.Image.fromarray(u8(field(rng, h, w, 3)), "RGB")
    pil("baseline_64x48.jpg", photo(48, 64), quality=90)
    pil("baseline422_57x43.jpg", photo(43, 57), quality=85, subsampling=1)
    pil("baseline444_38x51.jpg", photo(51, 38), quality=95, subsampling=0)
    pil("progressive_77x53.jpg", photo(53, 77), quality=80, progressive=True)
    pil("gray_45x37.jpg", PIL.Image.fromarray(u8(field(rng, 37, 45, 1)[..., 0]), "L"), quality=90)
    pil("cmyk_40x30.jpg", PIL.Image.fromarray(u8(field(rng, 30, 40, 4)), "CMYK"), quality=90)
    pil("exif6_100x80.jpg", photo(80, 100), quality=90, exif=exif_orientation(6))
    pil("exif3_35x26.jpg", photo(26, 35), quality=90, exif=exif_orientation(3))

    # Every other orientation, on small PNGs (their eXIf chunk).
    for o, (w, h) in {2: (19, 13), 4: (17, 11), 5: (21, 12), 7: (15, 22), 8: (23, 14)}.items():
        pil(f"exif{o}_{w}x{h}.png", PIL.Image.fromarray(u8(field(rng, h, w, 3)), "RGB"), exif=exif_orientation(o))

    names = []
    for name, data in files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
        names.append(name)
    return names


# ---- preprocessing cases ----------------------------------------------------------------------

IMAGENET = {"image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]}


def cases(names):
    """(case name, preprocessor config, files)."""
    some = ["rgb_37x23.png", "gray16_31x27.png", "baseline_64x48.jpg", "exif6_100x80.jpg"]
    return [
        # the classifier's own: bilinear down (and up) to 32x32, mean/std 0.5
        ("vit32", {"do_resize": True, "size": {"height": 32, "width": 32}, "resample": 2, "do_rescale": True,
                   "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [0.5] * 3, "image_std": [0.5] * 3},
         names),
        ("bilinear_up", {"size": {"height": 61, "width": 45}, "resample": 2, **IMAGENET}, some[:3]),
        ("bicubic", {"size": {"height": 29, "width": 35}, "resample": 3, **IMAGENET}, some + ["rgba_41x29.png"]),
        ("lanczos", {"size": {"height": 17, "width": 40}, "resample": 1}, some),
        ("box", {"size": {"height": 20, "width": 13}, "resample": 4}, some),
        ("hamming", {"size": {"height": 33, "width": 21}, "resample": 5}, some),
        ("shortest_edge", {"size": {"shortest_edge": 24}, "resample": 2, "image_mean": 0.4, "image_std": 0.3}, some),
        ("square_int", {"size": 28, "resample": 2}, some[:2]),
        ("center_crop", {"size": {"shortest_edge": 30}, "resample": 3, "do_center_crop": True,
                         "crop_size": {"height": 26, "width": 34}, **IMAGENET}, some),
        ("no_resize", {"do_resize": False, "do_normalize": False}, ["rgb_37x23.png", "cmyk_40x30.jpg"]),
        ("no_rescale", {"size": {"height": 16, "width": 16}, "do_rescale": False, "image_mean": [127.5, 120, 100],
                        "image_std": [60, 55.5, 70]}, some[:2]),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    torch.manual_seed(SEED)

    folder = os.path.join(args.out, "images")
    names = write_images(folder, rng)
    tensors = {}
    decoded = {}
    for name in names:
        img = np.array(load_image(os.path.join(folder, name)))
        if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
            raise RuntimeError(f"{name}: load_image gave {img.dtype} {img.shape}")
        decoded[name] = img
        tensors[f"decoded.{name}"] = torch.from_numpy(img.astype(np.float16))  # exact to 2048
    listed = []
    for case, config, files in cases(names):
        proc = transformers.ViTImageProcessorPil(**config)
        for name in files:
            pv = proc(images=PIL.Image.fromarray(decoded[name]), return_tensors="pt")["pixel_values"]
            tensors[f"{case}/{name}"] = pv[0].contiguous()
        listed.append({"name": case, "config": config, "files": files})
    path = os.path.join(folder, "expected.safetensors")
    meta = {"transformers_version": transformers.__version__, "pillow_version": PIL.__version__,
            "libjpeg_turbo_version": str(PIL.features.version("libjpeg_turbo"))}
    save_file(tensors, path, metadata=meta)
    sort_metadata_keys(path)
    with open(os.path.join(folder, "cases.json"), "w") as f:
        json.dump({"files": names, "cases": listed, **meta}, f, indent=1)
        f.write("\n")

    write_classifier(os.path.join(args.out, "image_cls_vit"), names)


LABELS = ["tabby cat", "golden retriever", "tench", "espresso", "volcano", "space shuttle"]


def write_classifier(folder, names):
    """A random-init ViTForImageClassification with a preprocessor_config.json, and the pipeline's
    answers. The weights are drawn wide so that the scores are far apart (no near tie decides an
    order): a draw with two logits of an image within 5e-3 of each other is redrawn."""
    os.makedirs(folder, exist_ok=True)
    cfg = transformers.ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=24, num_hidden_layers=2,
                                 num_attention_heads=3, intermediate_size=37, hidden_act="gelu",
                                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=0.6,
                                 num_labels=len(LABELS), id2label=dict(enumerate(LABELS)),
                                 label2id={l: i for i, l in enumerate(LABELS)})
    image_dir = os.path.join(os.path.dirname(folder), "images")
    files = [os.path.join(image_dir, n) for n in names]
    for attempt in range(50):
        torch.manual_seed(SEED + attempt)
        model = transformers.ViTForImageClassification(cfg).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape) * 0.3)
        model.save_pretrained(folder)
        transformers.ViTImageProcessorPil(size={"height": 32, "width": 32}, image_mean=[0.5] * 3,
                                          image_std=[0.5] * 3).save_pretrained(folder)
        pipe = transformers.pipeline("image-classification", model=folder)
        if type(pipe.image_processor).__name__ != "ViTImageProcessorPil":
            raise RuntimeError(f"the pipeline uses {type(pipe.image_processor).__name__}, not the PIL processor")
        full = pipe(files, top_k=len(LABELS))
        logits = pipe(files, top_k=len(LABELS), function_to_apply="none")
        gaps = [a["score"] - b["score"] for out in logits for a, b in zip(out, out[1:])]
        if min(gaps) > 5e-3:
            break
    else:
        raise RuntimeError("no draw with well separated scores")
    rel = [os.path.join("images", n) for n in names]
    runs = [
        {"kwargs": {}, "outputs": pipe(files)},
        {"kwargs": {"top_k": 2}, "outputs": pipe(files, top_k=2)},
        {"kwargs": {"top_k": 100}, "outputs": full},
        {"kwargs": {"function_to_apply": "sigmoid", "top_k": 3}, "outputs": pipe(files, function_to_apply="sigmoid",
                                                                                top_k=3)},
        {"kwargs": {"function_to_apply": "none"}, "outputs": pipe(files, function_to_apply="none")},
    ]
    for run in runs:  # the same images one at a time: batching must not matter
        run["outputs"] = [[{"label": o["label"], "score": float(o["score"])} for o in out] for out in run["outputs"]]
    with open(os.path.join(folder, "pipeline.json"), "w") as f:
        json.dump({"images": rel, "runs": runs, "transformers_version": transformers.__version__,
                   "pillow_version": PIL.__version__}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
