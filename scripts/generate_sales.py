"""Regenerate the shipped sample datasets in agent/assets/datasets (deterministic: same bytes on every run).

    python scripts/generate_sales.py

sales.csv: 200 orders of 2026 (a few discounts left empty, so null counts show up in the stats);
regions.json: the four sales regions with their managers (to show a JOIN across datasets).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "agent" / "assets" / "datasets"
PRODUCTS = {"widget": 4.50, "gadget": 12.00, "gizmo": 27.25, "doohickey": 8.75, "sprocket": 2.10}
REGIONS = [
    {"region": "North", "manager": "Ada Lovelace", "target_revenue": 6000},
    {"region": "South", "manager": "Alan Turing", "target_revenue": 5000},
    {"region": "East", "manager": "Grace Hopper", "target_revenue": 5500},
    {"region": "West", "manager": "Edsger Dijkstra", "target_revenue": 4500},
]


def sales_csv(rows: int = 200, seed: int = 7) -> str:
    """The CSV text of the sample orders."""
    rng = random.Random(seed)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "order_id",
            "order_date",
            "region",
            "product",
            "channel",
            "units",
            "unit_price",
            "discount",
            "revenue",
        ]
    )
    start = dt.date(2026, 1, 1)
    for i in range(1, rows + 1):
        product = rng.choice(sorted(PRODUCTS))
        units = rng.randint(1, 40)
        price = PRODUCTS[product]
        discount = rng.choice([0.0, 0.0, 0.05, 0.1, None])
        revenue = round(units * price * (1 - (discount or 0.0)), 2)
        writer.writerow(
            [
                1000 + i,
                (start + dt.timedelta(days=rng.randint(0, 180))).isoformat(),
                rng.choice([r["region"] for r in REGIONS]),
                product,
                rng.choice(["online", "store"]),
                units,
                f"{price:.2f}",
                "" if discount is None else f"{discount:.2f}",
                f"{revenue:.2f}",
            ]
        )
    return out.getvalue()


def main() -> None:
    """Write sales.csv and regions.json into the shipped datasets folder."""
    (HERE / "sales.csv").write_text(sales_csv(), encoding="utf-8")
    (HERE / "regions.json").write_text(json.dumps(REGIONS, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
