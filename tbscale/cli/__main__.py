from tbscale.cli import app

app()
