from tbscale.cli import app

app(prog_name="tbscale")
